# frozen_string_literal: true

# tail: /slow takes 1 s, as a slow page does: 900 ms waiting on a backend,
# then 100 ms of CPU (rendering). Everything else answers at once. The
# client sends /slow as 2% of its requests.
SLOW_WAIT = 0.9
SLOW_CPU = 0.1

run lambda { |env|
  if env["PATH_INFO"] == "/slow"
    sleep SLOW_WAIT
    start = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - start < SLOW_CPU
  end
  [200, { "content-type" => "text/html" }, ["Hello, Rack!"]]
}
