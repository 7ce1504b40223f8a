# frozen_string_literal: true

module Narwhal
  # Clients sending requests one after another through a proxy while a
  # test changes the server under them (USR2, QUIT, TTIN, kill -9). Include
  # it in a test that defines `get` (one request, returns its status).
  module ClientLoop
    # Upper bound on requests in one run, whatever the timing.
    MAX_REQUESTS = 50_000

    # Runs the block while `clients` loops send requests; returns every
    # status seen. They have sent `before` requests when the block starts
    # and send `after` more once it returns. The block gets a callable that
    # runs its own block while every loop is parked between two requests
    # (nothing in flight).
    def under_load(before: 10, after: 10, clients: 1)
      @load = { statuses: Queue.new, gate: Mutex.new, resume: ConditionVariable.new,
                hold: false, parked: 0, stop: false }
      threads = Array.new(clients) { Thread.new { client_loop } }
      between_requests = ->(&action) { while_parked(clients, &action) }
      statuses = @load[:statuses]
      wait_until(timeout: 15, message: "traffic through the proxy") { statuses.size >= before }
      yield between_requests
      seen = statuses.size
      wait_until(timeout: 15, message: "traffic afterwards") { statuses.size >= seen + after }
      @load[:stop] = true
      threads.each { |t| t.join(15) }
      Array.new(statuses.size) { statuses.pop }
    ensure
      @load[:stop] = true
    end

    # A deploy under load: USR2, the new master's `workers` workers up,
    # QUIT to the old master, which must be gone. Returns every status the
    # clients saw. Needs `@server` (a ServerProcess) and `@pid_path`; the
    # new master goes in `@extra_pids` for teardown.
    def upgrade_under_load(workers:, clients: 4)
      old = @server.pid
      under_load(clients: clients) do
        @server.signal(:USR2)
        new_pid = wait_until(timeout: 15, message: "new master") do
          pid = read_pid(@pid_path)
          pid if pid&.positive? && pid != old
        end
        @extra_pids = [new_pid]
        wait_until(timeout: 15, message: "new workers") { @server.worker_pids(new_pid).size == workers }
        @server.signal(:QUIT)
        @server.wait_exit(timeout: 15)
      end
    end

    private

    def client_loop
      load = @load
      until load[:stop] || load[:statuses].size >= MAX_REQUESTS
        load[:gate].synchronize do
          next unless load[:hold]

          load[:parked] += 1
          load[:resume].wait(load[:gate]) while load[:hold]
          load[:parked] -= 1
        end
        load[:statuses] << begin
          get
        rescue SystemCallError, IOError => e
          e # a failure like any non-200
        end
      end
    end

    def while_parked(clients)
      load = @load
      load[:gate].synchronize { load[:hold] = true }
      wait_until(message: "client loops parked") { load[:gate].synchronize { load[:parked] == clients } }
      yield
    ensure
      load[:gate].synchronize do
        load[:hold] = false
        load[:resume].broadcast
      end
    end
  end
end
