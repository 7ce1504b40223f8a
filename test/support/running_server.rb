# frozen_string_literal: true

require "logger"
require "net/http"
require "socket"
require "stringio"

module Narwhal
  # A Server run in a thread of the test process, stopped with a signal
  # its own handlers take (QUIT, or INT when standalone): never one that
  # would end the test process. Include it in a Minitest::Test.
  module RunningServer
    def new_config(**settings)
      @log = StringIO.new
      config = Configurator.new
      config.settings[:logger] = Logger.new(@log)
      config.settings[:listeners] = [["127.0.0.1:0", {}]]
      settings.each { |k, v| config.settings[k] = v }
      config
    end

    # Runs server in a thread; returns once it serves (its handlers are in
    # place): the port it listens on.
    def start(server)
      @thread = Thread.new { server.run }
      @thread.report_on_exception = false
      wait_until(message: "the server to serve") { @log.string.include?("serving pid=") || !@thread.alive? }
      @log.string[/listening on addr=127\.0\.0\.1:(\d+)/, 1]&.to_i
    end

    # Sends the signal to this process (the server's handler takes it) and
    # waits for run to return.
    def stop(signal = "QUIT")
      Process.kill(signal, Process.pid)
      assert @thread.join(10), "run returned after #{signal}"
    end

    def get(port, path = "/", headers = {})
      Net::HTTP.start("127.0.0.1", port) { |http| http.get(path, headers) }
    end

    def stop_server_left_running
      return unless @thread&.alive?

      Process.kill("QUIT", Process.pid)
      @thread.join(10)
    end
  end
end
