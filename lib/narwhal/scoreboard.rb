# frozen_string_literal: true

module Narwhal
  # The shared memory between the master and its workers, as Ruby sees it.
  # The C extension (ext/narwhal_http/scoreboard.c, layout in scoreboard.h)
  # defines the class and everything on the request path; this file adds
  # construction and the read side.
  #
  # One slot per worker number, made by the master before it forks:
  #
  #   board = Scoreboard.new(Scoreboard::MAX_SLOTS, threads: 1)
  #
  # The master:  board.reset(nr) / board.reset(nr, pid), board.busy_for(nr)
  #              (its `timeout`), board.requests(nr), board.snapshot(nr),
  #              board.histogram(nr, Scoreboard::REQUEST_DURATION)
  # A worker:    slot = board.thread_slot(nr, i)    # once, per request thread
  #              slot.bind_thread!                   # on the thread, once
  #              slot.request_started(method, path, fd) / slot.request_finished
  #              slot.responding!                    # before a response's first byte
  #              slot.queue_time(seconds)            # per request
  #              board.worker_slot(nr).count(Scoreboard::CONNECTIONS_ACCEPTED)
  #
  # Slot objects hold a pointer into the mapping, found once: the calls made
  # per request check nothing and allocate nothing.
  class Scoreboard
    # One worker slot read at one moment (metrics, status). busy_threads:
    # how many of its threads are in a request; longest_busy: seconds on the
    # oldest of those requests, nil when all are idle; counters: name => count
    # for each name in COUNTERS; serving: booted (false while it boots);
    # requests_in_flight: a CurrentRequest per busy thread, oldest first.
    Snapshot = Struct.new(:nr, :pid, :requests, :busy_threads, :longest_busy, :counters, :serving,
                          :requests_in_flight, keyword_init: true)

    # A request a thread is on: seconds since it started, its method and
    # path (truncated to METHOD_BYTES and PATH_BYTES, "..." marks a cut
    # path; bytes that are not UTF-8 read as U+FFFD); fd: its connection
    # in the worker (-1 unknown); responding: its response began; tid: the
    # thread's kernel id (0 unknown); backtraces: how many the thread wrote
    # when asked (BacktraceSignal).
    CurrentRequest = Struct.new(:thread, :seconds, :request_method, :path, :fd, :responding, :tid,
                                :backtraces) do
      def to_s
        "#{request_method} #{path}"
      end
    end

    # workers: slots (worker numbers 0...workers), 1..MAX_SLOTS; threads:
    # sub-slots per worker, 1..MAX_THREADS. ArgumentError outside those.
    def initialize(workers, threads: 1)
      map_shared(workers, threads)
    end

    def snapshot(nr)
      worker = worker_slot(nr)
      in_flight = requests_in_flight(nr)
      counters = COUNTERS.each_with_index.to_h { |name, c| [name, worker.counter(c)] }
      Snapshot.new(nr: nr, pid: worker.pid, requests: requests(nr), busy_threads: in_flight.size,
                   longest_busy: in_flight.first&.seconds, counters: counters, serving: serving?(nr),
                   requests_in_flight: in_flight)
    end

    # The requests worker nr's threads are on, the oldest first.
    def requests_in_flight(nr)
      Array.new(threads) do |i|
        seconds, method, path, length, *more = current_request(nr, i)
        next unless seconds

        path = "#{path}..." if length > path.bytesize
        CurrentRequest.new(i, seconds, readable(method), readable(path), *more)
      end.compact.sort_by { |request| -request.seconds }
    end

    private

    def readable(bytes)
      bytes.force_encoding(Encoding::UTF_8).scrub
    end
  end
end
