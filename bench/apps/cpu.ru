# frozen_string_literal: true

# cpu: every request burns 2 ms of this thread's CPU time (not wall time, so
# waiting for the CPU or the GVL does not shorten the work).
CPU_WORK = 0.002

run lambda { |_env|
  start = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - start < CPU_WORK
  [200, { "content-type" => "text/html" }, ["Hello, Rack!"]]
}
