# frozen_string_literal: true

# Starts agoo on a rackup file with a given number of workers and threads.
# agoo's own rack handler always sets thread_count to 0, so the suite starts
# it through Agoo::Server directly.
#
#   ruby bench/servers/agoo.rb APP.ru PORT WORKERS THREADS
require "agoo"
require "rack"
require "tmpdir"

app_path, port, workers, threads = ARGV
app = Rack::Builder.parse_file(app_path)
app = app.first if app.is_a?(Array) # Rack 2 returns [app, options]

Agoo::Log.configure(console: false, states: { INFO: false, DEBUG: false, connect: false, request: false,
                                              response: false, eval: false, push: false })
# thread_count 0 runs the app on the main thread: agoo's one-thread mode.
# poll_timeout: agoo's default of 0.1 s delays requests by up to 100 ms here
# (600 req/s on hello); 1 ms lets it run at full speed.
threads = Integer(threads)
Agoo::Server.init(Integer(port), Dir.tmpdir, bind: ["http://127.0.0.1:#{port}"], worker_count: Integer(workers),
                                             thread_count: threads == 1 ? 0 : threads, poll_timeout: 0.001)
Agoo::Server.handle(nil, "**", app)
Agoo::Server.start
# With thread_count > 0, start returns and agoo's threads serve: stay up.
sleep
