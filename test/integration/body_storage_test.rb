# frozen_string_literal: true

require "test_helper"

# A request body that cannot be stored — the file system of TMPDIR is full,
# or its temporary file cannot be opened — gets a clear answer with
# `connection: close`, one log line, and the worker goes on serving.
#
# The file systems are real: each server runs in a mount namespace of its
# own (unshare) with a small tmpfs as TMPDIR, which disappears with the
# server's processes.
class BodyStorageTest < Minitest::Test
  APP = <<~'RU'
    BIG = ("0123456789abcdef" * 4096).freeze # 64 KiB
    run lambda { |env|
      # 32 MiB, far more than the socket buffers and the file system hold
      return [200, { "content-type" => "application/octet-stream" }, Array.new(512, BIG).each] if env["PATH_INFO"] == "/big"

      body = "stored #{env['rack.input'].read.bytesize}"
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU
  # bodies over 16 KiB go to the temporary file
  # responses spool to the file at once, until the file system is full
  CONFIG = "client_body_buffer_size 16 * 1024\nresponse_buffer_size 0\nresponse_spool_disk_reserve 0\n"
  TMPFS_SIZE = 256 * 1024
  BIG_PART = 64 * 1024 # what the app writes at a time

  def start_server(tmpfs_options)
    @tmp = Dir.mktmpdir("narwhal-tmpfs")
    # root mounts in a new mount namespace; anyone else needs a user namespace too
    unshare = Process.uid.zero? ? %w[unshare --mount] : %w[unshare --map-root-user --mount]
    mount = "mount -t tmpfs -o #{tmpfs_options} narwhal-body \"$TMPDIR\" && exec \"$@\""
    @server = Narwhal::ServerProcess.start(app: APP, config: CONFIG, env: { "TMPDIR" => @tmp },
                                           wrapper: [*unshare, "sh", "-c", mount, "sh"])
  end

  def teardown
    @server&.stop
    FileUtils.rm_rf(@tmp) if @tmp
  end

  def post(body, headers: "")
    "POST /upload HTTP/1.1\r\nHost: x\r\n#{headers}Content-Length: #{body.bytesize}\r\n\r\n#{body}"
  end

  # Sends the request while reading the answer: the server may answer
  # before it has read the whole body.
  def exchange(request)
    c = @server.connect
    sender = Thread.new do
      c.write(request)
    rescue SystemCallError, IOError
      nil # the server stopped reading after answering
    end
    raw = c.read_to_eof(15)
    sender.join
    raw.sub(/^date: [^\r]+\r\n/, "date: D\r\n")
  ensure
    c&.close
  end

  # Bytes in the worker's unlinked temporary files.
  def spooled(pid)
    Dir.children("/proc/#{pid}/fd").sum do |fd|
      path = "/proc/#{pid}/fd/#{fd}"
      File.readlink(path).end_with?("(deleted)") ? File.stat(path).size : 0
    rescue SystemCallError
      0
    end
  end

  def log_lines(pattern)
    @server.log.lines.grep(pattern)
  end

  def test_full_file_system_gets_507_and_the_worker_serves_on
    start_server("size=#{TMPFS_SIZE}")
    workers = @server.worker_pids
    assert_equal "HTTP/1.1 507 Insufficient Storage\r\ncontent-type: text/plain\r\ndate: D\r\n" \
                 "content-length: 21\r\nconnection: close\r\n\r\nInsufficient Storage\n",
                 exchange(post("x" * (1024 * 1024)))
    wait_until(timeout: 10, message: "the log line") { log_lines(/not stored/).any? }
    assert_equal 1, log_lines(/not stored/).size, @server.log
    assert_match(/ERROR -- : request body of POST \/upload not stored: writing a temporary file in #{Regexp.escape(@tmp)} failed after \d+ bytes: No space left on device \(ENOSPC\); answered 507, closing$/,
                 log_lines(/not stored/).first)
    stored = Integer(log_lines(/not stored/).first[/after (\d+) bytes/, 1])
    assert_operator stored, :<=, TMPFS_SIZE

    # the failed body's file is gone: a body that needs most of the space fits
    body = "y" * (TMPFS_SIZE * 3 / 4)
    assert_match(/\AHTTP\/1\.1 200 OK\r\n.*\r\n\r\nstored #{body.bytesize}\z/m,
                 exchange(post(body, headers: "Connection: close\r\n")))
    assert_equal workers, @server.worker_pids, "the worker must not be replaced"
  end

  def test_chunked_body_on_a_full_file_system_gets_507
    start_server("size=#{TMPFS_SIZE}")
    chunks = Array.new(64) { "#{(16 * 1024).to_s(16)}\r\n#{'z' * 16 * 1024}\r\n" }.join
    raw = exchange("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n#{chunks}0\r\n\r\n")
    assert_equal "HTTP/1.1 507 Insufficient Storage", raw.lines.first&.chomp
    assert_includes raw, "\r\nconnection: close\r\n"
    wait_until(timeout: 10, message: "the log line") { log_lines(/not stored/).any? }
    assert_match(/request body of POST \/chunked not stored: .* \(ENOSPC\); answered 507, closing$/,
                 log_lines(/not stored/).first)
    assert_equal 1, log_lines(/not stored/).size
  end

  def test_temporary_file_that_cannot_be_opened_gets_500_and_the_worker_serves_on
    start_server("ro,size=#{TMPFS_SIZE}")
    workers = @server.worker_pids
    assert_equal "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ndate: D\r\n" \
                 "content-length: 22\r\nconnection: close\r\n\r\nInternal Server Error\n",
                 exchange(post("x" * 100_000))
    wait_until(timeout: 10, message: "the log line") { log_lines(/not stored/).any? }
    assert_equal 1, log_lines(/not stored/).size, @server.log
    assert_match(/ERROR -- : request body of POST \/upload not stored: opening a temporary file in #{Regexp.escape(@tmp)} failed: Read-only file system \(EROFS\); answered 500, closing$/,
                 log_lines(/not stored/).first)

    # a body kept in memory needs no file
    raw = exchange(post("small", headers: "Connection: close\r\n"))
    assert_match(/\AHTTP\/1\.1 200 OK\r\n.*\r\n\r\nstored 5\z/m, raw)
    assert_equal workers, @server.worker_pids, "the worker must not be replaced"
  end

  # The response spool on a full file system (no reserve kept): what does
  # not fit is not spooled, the writer waits for its client instead (as
  # past the spool's limits), and the client gets every byte.
  def test_a_response_spool_on_a_full_file_system_waits_for_the_client_and_the_body_arrives_whole
    start_server("size=#{TMPFS_SIZE}")
    workers = @server.worker_pids
    c = @server.connect
    c.write("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    # the spool's file filled the file system: the next write to it fails
    wait_until(timeout: 10, message: "the spool's file system full") { spooled(workers.first) > TMPFS_SIZE - BIG_PART }
    response = c.read_response(timeout: 30)
    assert_equal 200, response.status
    assert_equal ("0123456789abcdef" * 4096) * 512, response.body
    c.write("GET /again HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_equal "stored 0", c.read_response(timeout: 10).body, "the connection is served on"
    assert_equal workers, @server.worker_pids, "the worker must not be replaced"
    refute_match(/ERROR|internal error/, @server.log)
  ensure
    c&.close
  end

  # A file size limit (ulimit -f, LimitFSIZE=) is a full disk too: the
  # kernel's SIGXFSZ must not kill the worker, the write fails with EFBIG.
  def test_file_size_limit_gets_507_and_the_worker_serves_on
    @server = Narwhal::ServerProcess.start(app: APP, config: CONFIG,
                                           wrapper: ["prlimit", "--fsize=#{TMPFS_SIZE}", "--"])
    workers = @server.worker_pids
    raw = exchange(post("x" * (1024 * 1024)))
    assert_equal "HTTP/1.1 507 Insufficient Storage", raw.lines.first&.chomp, @server.log
    assert_includes raw, "\r\nconnection: close\r\n"
    wait_until(timeout: 10, message: "the log line") { log_lines(/not stored/).any? }
    assert_match(/not stored: writing a temporary file in \S+ failed after \d+ bytes: File too large \(EFBIG\); answered 507, closing$/,
                 log_lines(/not stored/).first)
    assert_match(/\AHTTP\/1\.1 200 OK\r\n.*\r\n\r\nstored 5\z/m, exchange(post("small", headers: "Connection: close\r\n")))
    assert_equal workers, @server.worker_pids, "the worker must not be replaced"
  end
end
