# frozen_string_literal: true

module Narwhal
  class Master
    class WorkerMonitor
      # The clients of a worker about to be killed for `timeout`, answered
      # first, so that they (and a proxy in front, whose health checks
      # would count a reset against the instance) see a response:
      #
      # - 504 Gateway Timeout to each request in flight that has not begun
      #   its response (the scoreboard says which, and on which socket);
      # - 503 Service Unavailable to each request that waited unread on one
      #   of the worker's connections (kept alive, or accepted and not yet
      #   read): the app never saw it, so it may be sent again.
      #
      # Both close their connection. The worker is stopped (SIGSTOP) first:
      # nothing of it runs meanwhile, so nothing it writes can cross an
      # answer, and none of its code is needed, even stuck in C with the
      # GVL held. The master reaches its sockets with pidfd_getfd(2)
      # (Stranded). Where that is refused (a kernel before 5.6, a security
      # policy) the worker is killed unanswered, as before, and the log says
      # so.
      class StrandedRequests
        TIMED_OUT = ResponseWriter::ErrorResponse.bytes(504).freeze
        WAITED = ResponseWriter::ErrorResponse.bytes(503).freeze
        # kill(2) only queues SIGSTOP: every thread of the worker is seen
        # stopped (/proc) before its marks are read, at most this long.
        STOP_WAIT = 1.0 # seconds
        STOP_POLL = 0.001 # seconds

        # listener_fds: a callable giving the master's listening sockets
        # (the worker's client connections are those accepted from them).
        def initialize(scoreboard, logger, listener_fds)
          @scoreboard = scoreboard
          @logger = logger
          @listener_fds = listener_fds
        end

        # Stops worker and answers its clients; the counts go into info
        # (a TimeoutInfo). The caller kills it next.
        def answer(worker, info)
          Process.kill(:STOP, worker.pid)
          wait_stopped(worker.pid)
          in_flight = @scoreboard.requests_in_flight(worker.nr)
          info.answered = in_flight.count { |request| answer_in_flight(worker, request) }
          skip = in_flight.map(&:fd)
          info.answered_waiting = Stranded.answer_waiting(worker.pid, @listener_fds.call, skip, WAITED)
        rescue SystemCallError => e
          @logger.error("worker=#{worker.nr} pid=#{worker.pid} clients not answered before the kill: " \
                        "#{ErrorMessage.for(e)}")
        end

        private

        def wait_stopped(pid)
          deadline = Clock.now + STOP_WAIT
          sleep STOP_POLL until stopped?(pid) || Clock.now > deadline
        end

        # Every thread's state is T (stopped); /proc/PID/task/TID/stat has
        # it after the command name, which may hold spaces and parentheses.
        def stopped?(pid)
          Dir.children("/proc/#{pid}/task").all? do |tid|
            stat = File.read("/proc/#{pid}/task/#{tid}/stat")
            stat[stat.rindex(")") + 2] == "T"
          end
        rescue SystemCallError
          true # gone: nothing of it runs
        end

        def answer_in_flight(worker, request)
          return false if request.responding || request.fd.negative?

          !Stranded.answer(worker.pid, request.fd, TIMED_OUT).nil?
        end
      end
    end
  end
end
