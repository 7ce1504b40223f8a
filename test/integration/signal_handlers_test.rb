# frozen_string_literal: true

require "test_helper"
require "net/http"

# Narwhal run inside a program that has INT/TERM handlers of its own (a
# rackup-like host, an embedding script): once narwhal stops, the program's
# handlers are back, and INT/TERM reach them rather than narwhal's queue.
class SignalHandlersTest < Minitest::Test
  APP = "->(_env) { [200, { 'content-type' => 'text/plain' }, ['served']] }"

  # Installs the host's handlers, runs `serve`, then sends itself INT and
  # TERM: the handlers that run say whose they are.
  def host_script(serve)
    <<~RUBY
      $stdout.sync = true
      trap("INT") { puts "host INT handler ran" }
      trap("TERM") { puts "host TERM handler ran" }
      require "narwhal"
      #{serve}
      puts "narwhal returned"
      Process.kill(:INT, Process.pid)
      Process.kill(:TERM, Process.pid)
      puts "host carries on"
    RUBY
  end

  # Runs the script in a new directory, waits for `ready` in its output,
  # fetches the URL it listens on, sends QUIT and returns the output.
  def run_host(script, ready:)
    Dir.mktmpdir do |dir|
      out = File.join(dir, "out")
      env = { "NARWHAL_CONFIG" => nil, "WEB_CONCURRENCY" => nil }
      pid = Process.spawn(env, RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"), "-e", script,
                          chdir: dir, out: out, err: %i[child out], pgroup: true)
      url = wait_until(timeout: 30, message: "#{ready.inspect} and a URL") do
        text = File.read(out)
        text.match?(ready) && text[%r{ url=(http://127\.0\.0\.1:\d+)$}, 1]
      end
      assert_equal "served", Net::HTTP.get(URI(url))
      Process.kill(:QUIT, pid)
      _, status = wait_until(timeout: 30, message: "the host's exit") { Process.wait2(pid, Process::WNOHANG) }
      pid = nil
      [File.read(out), status]
    ensure
      if pid
        Process.kill(:KILL, -pid)
        Process.wait(pid)
      end
    end
  end

  def assert_host_handlers_back(output, status)
    assert_includes output, "narwhal returned"
    assert_includes output, "host INT handler ran", output
    assert_includes output, "host TERM handler ran", output
    assert_includes output, "host carries on", output
    assert status.success?, "#{status.inspect}\n#{output}"
  end

  # rackup -s narwhal runs the master inside rackup's own process.
  def test_the_rackup_handler_gives_back_the_hosts_handlers
    handler = if Gem.loaded_specs["rackup"]
                ["rackup/handler/narwhal", "Rackup::Handler::Narwhal"]
              else
                ["rack/handler/narwhal", "Rack::Handler::Narwhal"]
              end
    serve = "require #{handler[0].inspect}; #{handler[1]}.run(#{APP}, Host: '127.0.0.1', Port: 0)"
    output, status = run_host(host_script(serve), ready: /worker=0 ready/)
    assert_includes output, "QUIT received: stopping workers gracefully"
    assert_host_handlers_back(output, status)
  end

  # A serving process given its listeners, as a worker runs one.
  def test_a_serving_process_gives_back_the_hosts_handlers
    serve = "c = Narwhal::Configurator.new; Narwhal::Server.new(#{APP}, c, " \
            "listeners: [Narwhal::Listener.new('127.0.0.1:0').tap { |l| " \
            "c.logger.info(\"listening on url=http://\#{l.address}\") }]).run"
    output, status = run_host(host_script(serve), ready: /serving pid=/)
    assert_includes output, "QUIT received: finishing requests in progress"
    assert_host_handlers_back(output, status)
  end

  # `Narwhal::Server.standalone(app, config).run` binds its own listeners.
  def test_a_standalone_server_gives_back_the_hosts_handlers
    serve = "c = Narwhal::Configurator.new; c.add_listener('127.0.0.1:0'); Narwhal::Server.standalone(#{APP}, c).run"
    output, status = run_host(host_script(serve), ready: /serving pid=/)
    assert_host_handlers_back(output, status)
  end
end
