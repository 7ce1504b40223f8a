# frozen_string_literal: true

# Ruby-level CPU profile of a narwhal process, for bench/profile.sh
# (PROFILER=stackprof). stackprof is not in bench/Gemfile: install it apart,
#   gem install stackprof --install-dir /tmp/stackprof-gems
# and pass that directory as STACKPROF_GEM_DIR. Loaded in the master, the
# trap is inherited by the workers it forks (the master's own USR2 handler
# replaces it there): profile.sh sends SIGUSR2 to the worker after the
# warm-up, and the process that profiled writes STACKPROF_OUT at exit.
$LOAD_PATH.unshift(*Dir[File.join(ENV.fetch("STACKPROF_GEM_DIR"), "gems", "stackprof-*", "lib")])
require "stackprof"

trap("USR2") { StackProf.start(mode: :cpu, interval: 250, raw: true) }
at_exit do
  if StackProf.running?
    StackProf.stop
    StackProf.results(ENV.fetch("STACKPROF_OUT"))
  end
end
