# frozen_string_literal: true

# Ruby-level CPU profile of a narwhal process, for bench/profile.sh
# (PROFILER=stackprof). stackprof is not in bench/Gemfile: install it apart,
#   gem install stackprof --install-dir /tmp/stackprof-gems
# and pass that directory as STACKPROF_GEM_DIR. Profiling starts on SIGUSR2
# (after the warm-up); the dump is written to STACKPROF_OUT at exit.
$LOAD_PATH.unshift(*Dir[File.join(ENV.fetch("STACKPROF_GEM_DIR"), "gems", "stackprof-*", "lib")])
require "stackprof"

trap("USR2") { StackProf.start(mode: :cpu, interval: 250, raw: true) }
at_exit do
  StackProf.stop
  StackProf.results(ENV.fetch("STACKPROF_OUT"))
end
