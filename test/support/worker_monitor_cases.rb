# frozen_string_literal: true

require "logger"
require "stringio"

module Narwhal
  # What the worker monitor's tests share: a logger whose lines are the
  # messages alone, workers with pids, and the verdicts a check gives.
  # Include it in a Minitest::Test.
  module WorkerMonitorCases
    Monitor = Narwhal::Master::WorkerMonitor

    # requests: { nr => served }
    CountingBoard = Struct.new(:served) do
      def requests(nr) = served.fetch(nr, 0)
      def busy_for(_nr) = nil
    end

    def setup
      @log = StringIO.new
      @logger = Logger.new(@log)
      @logger.formatter = ->(_severity, _time, _prog, message) { "#{message}\n" }
    end

    def workers(count)
      Array.new(count) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 100 + nr } }
    end

    # [[nr, signal], ...] that a check of list gives.
    def verdicts(monitor, list)
      found = []
      monitor.check(list) { |worker, sig| found << [worker.nr, sig] }
      found
    end
  end
end
