# frozen_string_literal: true

module Narwhal
  class Master
    # When the master may fork again after workers failed to boot, that is,
    # exited before they were ready (an app that does not load, an after_fork
    # hook that raises), or could not be forked at all (before_fork raised,
    # the kernel refused the process). Forking again at once would only fail again, as fast
    # as the machine can fork: instead each failed round doubles the wait,
    # from FIRST_DELAY up to MAX_DELAY, and only one worker at a time tries
    # while any failure is pending. A worker that becomes ready resets it all.
    #
    # While no worker has ever been ready the code has never worked: the
    # master gives up after GIVE_UP_AFTER failed rounds, so that a supervisor
    # (systemd, a deploy script, a terminal) sees it fail.
    class RespawnPolicy
      FIRST_DELAY = 0.5 # seconds before the first retry
      MAX_DELAY = 30.0 # the wait stops doubling here
      GIVE_UP_AFTER = 3 # failed rounds, when no worker was ever ready

      # failures: workers that failed to boot (or to fork) since one was
      # last ready.
      attr_reader :last_error, :rounds, :failures

      def initialize
        @booting = {} # pid => the round it was forked in
        @errors = {} # pid => what it reported
        @rounds = 0 # failed rounds since a worker was last ready
        @failures = 0
        @retry_at = nil
        @last_error = nil
        @ever_ready = false
      end

      def spawned(pid)
        @booting[pid] = @rounds
      end

      # Returns true for the first worker ever ready.
      def ready(pid)
        @booting.delete(pid)
        first = !@ever_ready
        @ever_ready = true
        reset
        @last_error = nil
        first
      end

      def boot_error(pid, message)
        @errors[pid] = message
      end

      # A worker was reaped. Returns the line to log when it failed to boot,
      # nil otherwise (it had been ready, or was told to stop).
      def exited(worker, status, now, stopping: false)
        round = @booting.delete(worker.pid)
        error = @errors.delete(worker.pid) || "exited before it was ready (#{status.inspect})"
        return nil if round.nil? || stopping || worker.quitting

        next_round(now) if round == @rounds # the first failure of this round
        @failures += 1
        describe_failure(worker, error)
      end

      # A worker could not be forked (before_fork raised, the kernel refused
      # the process): a failed round, as a failed boot is. Returns what comes
      # next, for the log line.
      def fork_failed(error, now)
        next_round(now)
        @failures += 1
        @last_error = error
        outlook
      end

      # How many workers may be forked now: nil for any number.
      def allowance(now)
        return nil if @rounds.zero?
        return 0 if now < @retry_at || !@booting.empty?

        1
      end

      # Seconds until a delayed fork is due; nil when none is waiting.
      def wait(now)
        @retry_at - now if @retry_at && @retry_at > now
      end

      # Whether a worker of this master was ever ready.
      def ever_ready?
        @ever_ready
      end

      def give_up?
        !@ever_ready && @rounds >= GIVE_UP_AFTER && @booting.empty?
      end

      # HUP: the operator may have fixed the app; try again at once.
      def reset
        @rounds = 0
        @failures = 0
        @retry_at = nil
      end

      def self.delay(rounds)
        [FIRST_DELAY * (2**(rounds - 1)), MAX_DELAY].min
      end

      private

      def next_round(now)
        @rounds += 1
        @retry_at = now + self.class.delay(@rounds)
      end

      def describe_failure(worker, error)
        what = error == @last_error ? "failed to boot again (same error)" : "failed to boot: #{error}"
        @last_error = error
        "worker=#{worker.nr} pid=#{worker.pid} #{what}; #{@failures} failure(s) in a row, #{outlook}"
      end

      def outlook
        return "giving up" if !@ever_ready && @rounds >= GIVE_UP_AFTER

        limit = @ever_ready ? "" : " (attempt #{@rounds + 1} of #{GIVE_UP_AFTER})"
        "next attempt in #{format('%g', self.class.delay(@rounds))}s#{limit}"
      end
    end
  end
end
