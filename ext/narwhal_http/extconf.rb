# frozen_string_literal: true

require "mkmf"

$CFLAGS << " -std=gnu99 -Wall -Wextra -Wno-unused-parameter"
# AddressSanitizer (rake asan, rake fuzz:loop): heap and globals only. Ruby
# unwinds an exception with a longjmp that ASan does not see, so the
# poisoned redzones around the stack variables of a frame it passes
# through stay poisoned, and are reported later against whatever code uses
# that stack next. The libFuzzer targets (fuzz/) keep stack checks for the
# parser and the response head.
$CFLAGS << " -fsanitize=address -fno-omit-frame-pointer --param asan-stack=0" if ENV["NARWHAL_ASAN"]

create_makefile("narwhal_http/narwhal_http")
