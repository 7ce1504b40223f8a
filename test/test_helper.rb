# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "minitest/autorun"
require "socket"
require "tmpdir"
require "tempfile"
require "timeout"
require "narwhal"
require_relative "support/server_process"
require_relative "support/raw_client"
require_relative "support/leftover_processes"

module Narwhal
  module TestHelpers
    # What a response that keeps its connection ends its head with: the
    # default keepalive_timeout (5 s) less a second.
    KEPT = "keep-alive: timeout=4\r\n"

    # The pid in a pid file, or nil while it does not exist (it may be
    # renamed between a check and a read, as during USR2).
    def read_pid(path)
      pid = File.read(path).to_i
      pid.positive? ? pid : nil
    rescue Errno::ENOENT
      nil
    end

    # Runs the block with these environment variables (nil: unset), then
    # puts back what was there.
    def with_env(vars)
      saved = vars.keys.to_h { |k| [k, ENV.fetch(k, nil)] }
      vars.each { |k, v| ENV[k] = v }
      yield
    ensure
      saved&.each { |k, v| ENV[k] = v }
    end

    # A body in which a test app wrote "queue_time=SECONDS" (its
    # env["narwhal.queue_time"]): a proxy's X-Request-Start reached it, as
    # a plausible wait of a few seconds at most.
    def assert_queue_time_reported(body)
      seen = body[/queue_time=(\d+\.\d+(?:e-\d+)?)/, 1] # (chunked with Rack 2's Lint)
      assert seen, "the app got no queue time: #{body}"
      assert_operator Float(seen), :>=, 0
      assert_operator Float(seen), :<, 5
    end

    # Polls the block until it returns a truthy value or the deadline passes.
    def wait_until(timeout: 10, interval: 0.01, message: "condition")
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        result = yield
        return result if result
        raise Minitest::Assertion, "timed out after #{timeout}s waiting for #{message}" if
          Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep interval
      end
    end
  end
end

Minitest::Test.include(Narwhal::TestHelpers)
Narwhal::LeftoverProcesses.install
