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
  #              (its `timeout`), board.requests(nr), board.snapshot(nr)
  # A worker:    slot = board.thread_slot(nr, i)    # once, per request thread
  #              slot.request_started / slot.request_finished   # per request
  #              board.worker_slot(nr).count(Scoreboard::CONNECTIONS_ACCEPTED)
  #
  # Slot objects hold a pointer into the mapping, found once: the calls made
  # per request take no arguments, check nothing and allocate nothing.
  class Scoreboard
    # One worker slot read at one moment (metrics, status). busy_threads:
    # how many of its threads are in a request; longest_busy: seconds on the
    # oldest of those requests, nil when all are idle; counters: name => count
    # for each name in COUNTERS.
    Snapshot = Struct.new(:nr, :pid, :requests, :busy_threads, :longest_busy, :counters,
                          keyword_init: true)

    # workers: slots (worker numbers 0...workers), 1..MAX_SLOTS; threads:
    # sub-slots per worker, 1..MAX_THREADS. ArgumentError outside those.
    def initialize(workers, threads: 1)
      map_shared(workers, threads)
    end

    def snapshot(nr)
      worker = worker_slot(nr)
      busy = Array.new(threads) { |i| worker.thread(i).busy_for }.compact
      counters = COUNTERS.each_with_index.to_h { |name, c| [name, worker.counter(c)] }
      Snapshot.new(nr: nr, pid: worker.pid, requests: requests(nr), busy_threads: busy.size,
                   longest_busy: busy.max, counters: counters)
    end
  end
end
