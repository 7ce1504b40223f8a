# frozen_string_literal: true

module Narwhal
  class Responder
    # The watchdog behind `soft_timeout`: one Ruby thread per worker that
    # looks at each app thread's scoreboard slot and raises RequestTimeout
    # into a thread whose current request is older than the limit, at most
    # once per request. The master's `timeout` (SIGKILL) stays the backstop
    # for a thread that an exception cannot reach (a C call that never
    # checks for interrupts).
    #
    # Each app thread registers once and hands its Watch to its Responder:
    #
    #   soft = SoftTimeout.new(15, logger).start   # in the worker, after fork
    #   # in each app thread (or for it, from any thread):
    #   watch = soft.watch(thread, scoreboard.thread_slot(nr, i))
    #   Watched.new(app, logger, slot, counters, soft_timeout: watch, on_timeout: ...)
    #   soft.stop                                  # when the worker is done
    #
    # With soft_timeout off none of this exists: no thread, and a plain
    # Responder runs requests.
    class SoftTimeout
      # The watchdog looks at the slots this often: a quarter of the limit,
      # but at least ten times a second, so a request is interrupted at most
      # 0.1 s past the limit (it costs an idle worker ten short wake-ups a
      # second, with a few reads of shared memory each).
      MAX_INTERVAL = 0.1

      attr_reader :seconds, :interval

      # Runs the block with RequestTimeout deferred: for the server's own
      # writes that app code calls into (early hints, hijack's flush), which
      # must not be cut halfway nor leave the spool's budget half taken. A
      # pending timeout lands when the block returns into the app's code.
      # Without soft_timeout nothing raises it, and this costs nothing more.
      def self.deferred(&block)
        Thread.handle_interrupt(Watch::DEFERRED, &block)
      end

      def initialize(seconds, logger)
        @seconds = seconds
        @logger = logger
        @interval = [seconds / 4.0, MAX_INTERVAL].min
        @watches = []
        @lock = Mutex.new
        @wakeup = ConditionVariable.new
        @thread = nil
        @stopping = false
      end

      # Registers an app thread and its Scoreboard::ThreadSlot; returns the
      # Watch its Responder brackets each request with. From any thread.
      def watch(thread, slot)
        watch = Watch.new(thread, slot, @seconds)
        @lock.synchronize { @watches << watch }
        watch
      end

      # Starts the watchdog thread (once; in the process that serves).
      def start
        @lock.synchronize do
          @stopping = false
          @thread ||= Thread.new { run }.tap { |t| t.name = "soft_timeout" }
        end
        self
      end

      def stop
        thread = @lock.synchronize do
          @stopping = true
          @wakeup.signal
          @thread.tap { @thread = nil }
        end
        thread&.join
      end

      private

      def run
        @lock.synchronize do
          until @stopping
            @wakeup.wait(@lock, @interval)
            check_all unless @stopping
          end
        end
      end

      def check_all
        @watches.each(&:check)
      rescue StandardError => e
        @logger.error("soft_timeout watchdog: #{e.class}: #{e.message}#{ErrorMessage.backtrace(e)}")
      end

      # One app thread as the watchdog and the thread's Responder share it.
      #
      # The responder runs a whole request in #serve, where RequestTimeout is
      # deferred (Thread.handle_interrupt): scoreboard marks, socket writes,
      # callbacks and the responder's own state are never cut in half. Only
      # the app's code, run in #interruptible, takes it at once. The
      # watchdog raises only while holding the lock that #serve takes on its
      # way out, and only while the slot says a request is running, so the
      # exception lands inside this request's #serve or not at all; one
      # raised while narwhal's own code ran is still pending at the end and
      # is taken there (the app was not interrupted).
      class Watch
        DEFERRED = { RequestTimeout => :never }.freeze
        INTERRUPTIBLE = { RequestTimeout => :immediate }.freeze

        attr_reader :seconds

        def initialize(thread, slot, seconds)
          @thread = thread
          @slot = slot
          @seconds = seconds
          @lock = Mutex.new
          @raised = false      # raised into the current request
          @interrupted = false # the last request's app code took it
          @writer = DeferredWriter.new
        end

        # Runs one request. Returns the block's value. The thread that serves
        # is the one raised into, whatever thread was registered (a server
        # may be built on one thread and run on another).
        def serve
          Thread.handle_interrupt(DEFERRED) do
            @thread = Thread.current
            @writer.sent = false
            yield
          ensure
            finish
          end
        end

        # Runs app code: a RequestTimeout raised now, or pending, lands here.
        def interruptible
          Thread.handle_interrupt(INTERRUPTIBLE) { yield }
        end

        # The connection's writer, wrapped so that a write always completes.
        def writer(out)
          @writer.out = out
          @writer
        end

        # Whether the current request sent any response byte.
        def response_started?
          @writer.sent
        end

        # Whether the request #serve just ran was interrupted (its app code
        # took the RequestTimeout, whether narwhal or the app rescued it).
        def interrupted?
          @interrupted
        end

        # In the watchdog's thread.
        def check
          @lock.synchronize do
            return if @raised

            busy = @slot.busy_for
            return unless busy && busy >= @seconds

            @raised = true
            @thread.raise(RequestTimeout, "request ran #{busy.round(3)}s, past soft_timeout (#{@seconds}s)")
          end
        end

        private

        # The slot is idle again (the responder marked it): no raise can come
        # after the lock; one that came is either taken already or pending.
        def finish
          raised = @lock.synchronize do
            was = @raised
            @raised = false
            was
          end
          @interrupted = raised && !take_pending
        end

        # Thread.pass checks for interrupts; Thread.pending_interrupt? cannot
        # be asked about one class on Ruby 3.1 (it crashes the VM).
        def take_pending
          Thread.handle_interrupt(INTERRUPTIBLE) { Thread.pass }
          false
        rescue RequestTimeout
          true
        end
      end

      # The connection's SocketWriter as the response code sees it under a
      # soft timeout: every call runs with RequestTimeout deferred, so a write
      # is never cut halfway, and it records whether a byte may have gone out
      # (then a 503 can no longer be sent).
      class DeferredWriter
        attr_accessor :out, :sent

        def write(str)
          Thread.handle_interrupt(Watch::DEFERRED) do
            @sent = true
            @out.write(str)
          end
        end

        def write_file(file, length)
          Thread.handle_interrupt(Watch::DEFERRED) do
            @sent = true
            @out.write_file(file, length)
          end
        end

        def io
          @out.io
        end

        # What the writer may learn later goes through, deferred too.
        def method_missing(name, *args, **kwargs, &block)
          return super unless @out.respond_to?(name)

          Thread.handle_interrupt(Watch::DEFERRED) { @out.public_send(name, *args, **kwargs, &block) }
        end

        def respond_to_missing?(name, include_private = false)
          @out.respond_to?(name, include_private) || super
        end
      end
    end
  end
end
