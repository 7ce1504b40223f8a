# frozen_string_literal: true

require "mkmf"

$CFLAGS << " -std=gnu99 -Wall -Wextra -Wno-unused-parameter"
$CFLAGS << " -fsanitize=address -fno-omit-frame-pointer" if ENV["NARWHAL_ASAN"]

create_makefile("narwhal_http/narwhal_http")
