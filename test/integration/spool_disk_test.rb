# frozen_string_literal: true

require "test_helper"
require "digest"

# Responses that clients do not read go to the spool, and once the worker's
# memory budget (response_spool_max) is used up, to disk, so that no client
# holds an app thread. Only past the disk limits (per response, per worker,
# the free-space reserve) does the app's write wait for its client, under
# write_timeout.
module SpoolDiskCases
  CHUNK_SIZE = 64 * 1024
  MAX_CHUNKS = 256

  APP = <<~RU
    CHUNK = ("0123456789abcdef" * #{CHUNK_SIZE / 16}).freeze
    # made before the requests, so that the workers' growth is the server's
    # own, not the app's garbage: chunk i carries its number
    CHUNKS = Array.new(#{MAX_CHUNKS}) { |i| (format("%08d", i) + CHUNK.byteslice(8, CHUNK.bytesize - 8)).freeze }

    # a body of 64 KiB chunks; leaves a mark once produced
    class Stream
      def initialize(id, chunks) = (@id, @chunks = id, chunks)
      def each(&block) = @chunks.times { |i| block.call(CHUNKS[i]) }
      def close = File.write("produced-\#{@id}", "")
    end

    run lambda { |env|
      id = env["QUERY_STRING"]
      case env["PATH_INFO"]
      when "/stream" then [200, { "content-type" => "application/octet-stream" }, Stream.new(id, id[/\\d+\\z/].to_i)]
      else [200, { "content-type" => "text/plain", "content-length" => (env["PATH_INFO"].bytesize + 3).to_s },
            ["ok \#{env['PATH_INFO']}"]]
      end
    }
  RU

  def self.expected_sha(chunks)
    chunk = "0123456789abcdef" * (CHUNK_SIZE / 16)
    digest = Digest::SHA256.new
    chunks.times { |i| digest << format("%08d", i) << chunk.byteslice(8, chunk.bytesize - 8) }
    digest.hexdigest
  end

  def teardown
    @clients&.each(&:close)
    @server&.stop
  end

  def start(config, workers: 2, **options)
    @server = Narwhal::ServerProcess.start(app: APP, workers: workers, config: "worker_processes #{workers}\n#{config}",
                                           **options)
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # A request for a body of `chunks` chunks, never read.
  def non_reader(id, chunks)
    c = @server.connect
    c.write("GET /stream?#{id}-#{chunks} HTTP/1.1\r\nHost: x\r\n\r\n")
    (@clients ||= []) << c
    c
  end

  # One request on a new connection, answered within timeout; its latency.
  def timed_get(path, timeout: 10)
    started = now
    c = @server.connect
    c.write("GET #{path} HTTP/1.1\r\nHost: x\r\n\r\n")
    response = c.read_response(timeout: timeout)
    assert_equal 200, response.status, "#{path}: #{response.status_line}"
    assert_equal "ok #{path}", response.body
    now - started
  ensure
    c&.close
  end

  def produced?(id, chunks)
    File.exist?(File.join(@server.dir, "produced-#{id}-#{chunks}"))
  end

  # Resident memory of the workers, in bytes.
  def workers_rss
    @server.worker_pids.sum do |pid|
      File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+) kB/, 1].to_i * 1024
    end
  end

  # Unlinked temporary files the workers hold open: the spools' files.
  def spool_files
    spool_file_paths.size
  end

  # Bytes on disk in those files.
  def spooled_on_disk
    spool_file_paths.sum do |path|
      stat = File.stat(path)
      [stat.size, stat.blocks * 512].max
    rescue SystemCallError
      0
    end
  end

  def spool_file_paths
    @server.worker_pids.flat_map do |pid|
      Dir.children("/proc/#{pid}/fd").filter_map do |fd|
        path = "/proc/#{pid}/fd/#{fd}"
        path if File.readlink(path).end_with?("(deleted)")
      rescue SystemCallError
        nil
      end
    end
  end
end

# Many clients that never read a large streamed body, a fast client beside
# them: the fast client is answered promptly all along, with one request
# thread (the app runs on the worker's reactor thread) or several.
class SpoolNonReadersTest < Minitest::Test
  include SpoolDiskCases

  NON_READERS = 20
  CHUNKS = 256 # 16 MiB each, 320 MiB in all
  MEMORY_BUDGET = 256 * 1024 # less than the connections would keep in memory (20 x 64 KiB)
  # what the workers may grow by: the memory budgets and the connections,
  # far below the bodies held (320 MiB)
  RSS_GROWTH_MAX = 64 * 1024 * 1024
  FAST_LATENCY_MAX = 2.5 # seconds: generous, on a loaded machine

  def test_non_readers_do_not_hold_the_only_request_thread
    assert_non_readers_hold_no_thread(1)
  end

  def test_non_readers_do_not_hold_request_threads
    assert_non_readers_hold_no_thread(4)
  end

  def assert_non_readers_hold_no_thread(threads)
    start("threads #{threads}\nresponse_spool_max #{MEMORY_BUDGET}\nwrite_timeout 60\n")
    rss_before = workers_rss
    ids = Array.new(NON_READERS) { |i| "slow#{i}" }
    slow = ids.map { |id| non_reader(id, CHUNKS) }
    latencies = []
    # a fast request at a time until every slow body was produced (spooled)
    wait_until(timeout: 90, interval: 0, message: "the non-readers' bodies spooled while a fast client is served") do
      latencies << timed_get("/fast")
      ids.all? { |id| produced?(id, CHUNKS) }
    end
    20.times { latencies << timed_get("/fast") }
    assert_operator latencies.max, :<, FAST_LATENCY_MAX,
                    "slowest of #{latencies.size} fast requests: #{(latencies.max * 1000).round} ms"
    growth = workers_rss - rss_before
    assert_operator growth, :<, RSS_GROWTH_MAX, "workers' RSS grew by #{growth / 1024 / 1024} MiB"
    assert_operator spool_files, :>, 0, "the bodies wait on disk"

    # one reads its body whole and intact; the others go away unread
    response = slow.first.read_response(timeout: 60)
    assert_equal SpoolDiskCases.expected_sha(CHUNKS), Digest::SHA256.hexdigest(response.body)
    slow.each(&:close)
    wait_until(timeout: 20, message: "spool files freed once the clients closed") { spool_files.zero? }
    refute_match(/write timeout/, @server.log)
    assert_operator timed_get("/after"), :<, FAST_LATENCY_MAX
  end
end

# Past the disk limits a response's writes wait for its client under
# write_timeout, and the spools never hold more on disk than allowed: per
# response, per worker, and the free space kept on the file system.
class SpoolDiskLimitsTest < Minitest::Test
  include SpoolDiskCases

  CHUNKS = 256 # 16 MiB: far past every limit below
  MIB = 1024 * 1024
  # everything spooled goes to disk
  CONFIG = "write_timeout 0.5\nresponse_buffer_size 0\n"
  TMPFS_SIZE = 8 * MIB

  def teardown
    super
    FileUtils.rm_rf(@tmp) if @tmp
  end

  # Sends `count` non-readers; each is cut off after write_timeout, with
  # at most `limit` bytes on disk meanwhile; a fast client is served after.
  def assert_waits_past_the_limit(limit, count: 1)
    clients = Array.new(count) { |i| non_reader("limited#{i}", CHUNKS) }
    largest = 0
    wait_until(timeout: 30, interval: 0.005, message: "#{count} write timeouts logged") do
      largest = [largest, spooled_on_disk].max
      @server.log.scan("write timeout: client took no data for 0.5s, closing (GET /stream)").size >= count
    end
    assert_operator largest, :>, 0, "spooled to disk first"
    assert_operator largest, :<=, limit, "bytes on disk at most, while the writes waited"
    clients.each do |c|
      assert_operator c.read_to_eof(10).bytesize, :<, CHUNK_SIZE * CHUNKS, "cut short"
    end
    assert_operator timed_get("/fast"), :<, 5
    wait_until(message: "spool files freed") { spool_files.zero? }
  end

  def test_past_the_per_response_limit_the_writer_waits
    start(CONFIG + "threads 1\nresponse_spool_file_max 2 * 1024 * 1024\n", workers: 1)
    assert_waits_past_the_limit(2 * MIB)
  end

  # two threads write at once: together they stay within the limit
  def test_past_the_per_worker_limit_the_writers_wait
    start(CONFIG + "threads 2\nresponse_spool_disk_max 3 * 1024 * 1024\n", workers: 1)
    assert_waits_past_the_limit(3 * MIB, count: 2)
  end

  # TMPDIR is a small tmpfs of the server's own (a mount namespace, as in
  # body_storage_test.rb): what statvfs reports free there is real.
  def test_the_free_space_reserve_is_kept_on_the_spools_file_system
    @tmp = Dir.mktmpdir("narwhal-tmpfs")
    unshare = Process.uid.zero? ? %w[unshare --mount] : %w[unshare --map-root-user --mount]
    mount = "mount -t tmpfs -o size=#{TMPFS_SIZE} narwhal-spool \"$TMPDIR\" && exec \"$@\""
    start(CONFIG + "threads 1\nresponse_spool_disk_reserve 5 * 1024 * 1024\n", workers: 1, env: { "TMPDIR" => @tmp },
                                                                    wrapper: [*unshare, "sh", "-c", mount, "sh"])
    assert_waits_past_the_limit(TMPFS_SIZE - (5 * MIB))
  end
end
