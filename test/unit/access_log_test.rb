# frozen_string_literal: true

require "test_helper"
require "json"
require "logger"
require "stringio"
require "time"

# The lines AccessLog writes, read back from its file: the combined format
# as Apache and nginx write it, JSON that parses, and client bytes that
# cannot break either.
class AccessLogTest < Minitest::Test
  # Apache's combined format, then duration, queue time and request id.
  QUOTED = /"((?:[^"\\]|\\.)*)"/
  STAMP = %r{\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]}
  SECONDS = /(\d+\.\d{6}|-)/
  COMBINED = /\A(\S+) - (\S+) #{STAMP} #{QUOTED} (\d{3}) (\d+) #{QUOTED} #{QUOTED} #{SECONDS} #{SECONDS} #{QUOTED}\n\z/

  ENV_GET = {
    "REMOTE_ADDR" => "10.0.0.7", "REQUEST_METHOD" => "GET", "REQUEST_URI" => "/a?b=1",
    "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_USER_AGENT" => "curl/7.88.1", "HTTP_REFERER" => "http://x/"
  }.freeze

  def setup
    @dir = Dir.mktmpdir("narwhal-access-log")
    @path = File.join(@dir, "access.log")
    @errors = StringIO.new
  end

  def teardown
    @log&.close
    FileUtils.rm_rf(@dir)
  end

  def writer(format)
    @log = Narwhal::AccessLog.open(@path, format, Logger.new(@errors))
    @log.line_writer
  end

  # What the file holds once the buffer is written out.
  def lines
    @log&.flush
    File.readlines(@path)
  end

  def test_combined_line
    writer(:combined).record(ENV_GET.merge("HTTP_X_REQUEST_ID" => "req-1"), 200, {}, 5, 0.000214, 0.0015)
    line = lines.first
    m = COMBINED.match(line)
    assert m, line
    assert_equal ["10.0.0.7", "-", "GET /a?b=1 HTTP/1.1", "200", "5", "http://x/", "curl/7.88.1", "0.000214",
                  "0.001500", "req-1"], m.captures.values_at(0, 1, 3..10)
    assert_in_delta Time.now.to_i, Time.strptime(m[3], "%d/%b/%Y:%H:%M:%S %z").to_i, 5
  end

  def test_combined_unknowns_are_dashes_and_the_request_id_may_come_from_the_response
    log = writer(:combined)
    log.record({ "REMOTE_ADDR" => "127.0.0.1" }, 400, nil, 12, nil, nil)
    log.record(ENV_GET.merge("HTTP_USER_AGENT" => ""), 200, { "x-request-id" => "from-app" }, 0, 0.5, nil)
    first, second = lines.map { |l| COMBINED.match(l) }
    assert_equal ["-", "400", "12", "-", "-", "-", "-", "-"], first.captures.values_at(3..10)
    assert_equal ["-", "from-app"], second.captures.values_at(7, 10)
  end

  def test_combined_escapes_what_would_break_the_line
    env = ENV_GET.merge("REQUEST_URI" => "/\"quoted\"\\x".b, "HTTP_USER_AGENT" => "evil\n127.0.0.1 - - fake\x01",
                        "HTTP_REFERER" => "caf\xC3\xA9".b, "REMOTE_USER" => "bob smith",
                        "HTTP_X_REQUEST_ID" => "id\"x")
    writer(:combined).record(env, 200, {}, 1, 0.1, nil)
    assert_equal 1, lines.size
    m = COMBINED.match(lines.first)
    assert m, lines.first
    assert_equal ['GET /\x22quoted\x22\x5Cx HTTP/1.1', 'caf\xC3\xA9', 'evil\x0A127.0.0.1 - - fake\x01', 'id\x22x'],
                 m.captures.values_at(3, 6, 7, 10)
    assert_equal 'bob\x20smith', m[2] # a bare field: its space escaped too
  end

  def test_json_line_parses_with_every_field
    writer(:json).record(ENV_GET.merge("HTTP_X_REQUEST_ID" => "req-1"), 201, {}, 5, 0.000214, 0.0015)
    line = lines.first
    assert line.end_with?("}\n")
    entry = JSON.parse(line)
    assert_equal({ "remote_addr" => "10.0.0.7", "remote_user" => nil, "method" => "GET", "uri" => "/a?b=1",
                   "protocol" => "HTTP/1.1", "status" => 201, "bytes" => 5, "duration" => 0.000214,
                   "queue_time" => 0.0015, "request_id" => "req-1", "referer" => "http://x/",
                   "user_agent" => "curl/7.88.1" }, entry.except("time"))
    assert_match(/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d\z/, entry["time"])
    assert_in_delta Time.now.to_f, Time.iso8601(entry["time"]).to_f, 5
  end

  def test_json_escapes_and_keeps_utf8_and_invalid_bytes_stay_json
    env = { "REMOTE_ADDR" => "unix", "REQUEST_METHOD" => "GET", "REQUEST_URI" => "/\"a\"\\\t\x7f".b,
            "HTTP_USER_AGENT" => "caf\xC3\xA9 \u2603".b, "HTTP_REFERER" => "bad\xFF\xC3".b,
            "REMOTE_USER" => "caf\u00e9" }
    writer(:json).record(env, 200, nil, 0, nil, nil)
    assert_equal 1, lines.size
    entry = JSON.parse(lines.first)
    assert_equal "/\"a\"\\\t\u007f", entry["uri"]
    assert_equal "café ☃", entry["user_agent"]
    assert_equal "bad\u00ff\u00c3", entry["referer"]
    assert_equal "café", entry["remote_user"]
    assert_nil entry["protocol"]
    assert_nil entry["duration"]
  end

  def test_values_that_are_not_strings_and_numbers_out_of_range
    env = ENV_GET.merge("REMOTE_USER" => :alice, "HTTP_REFERER" => 42)
    log = writer(:combined)
    log.record(env, "404", { "x-request-id" => %w[a b] }, 3, -1.0, Float::NAN)
    log.record(ENV_GET, 200, nil, 0, 10**9, 12.3456789)
    first, second = lines.map { |l| COMBINED.match(l) }
    assert_equal ["alice", "404", "3", "42", "0.000000", "0.000000", "a, b"],
                 first.captures.values_at(1, 4, 5, 6, 8, 9, 10)
    assert_equal ["31536000.000000", "12.345679"], second.captures.values_at(8, 9), "capped at a year; rounded"
    @log.close
    File.write(@path, "")
    writer(:json).record(env, 201.0, { "x-request-id" => %w[a b] }, 3, Float::INFINITY, nil)
    entry = JSON.parse(lines.first)
    assert_equal ["alice", "42", 201, 31_536_000.0, "a, b"],
                 entry.values_at("remote_user", "referer", "status", "duration", "request_id")
  end

  # Whatever bytes a client sends, a combined line stays one line that
  # parses, and a JSON line stays JSON that gives the bytes back when they
  # were UTF-8, else each byte as the code point of its value.
  def test_random_bytes_never_break_a_line
    random = Random.new(20_261_123)
    sample = lambda do
      Array.new(random.rand(0..40)) { random.rand(4).zero? ? random.rand(256) : random.rand(0x20..0x7e) }.pack("C*")
    end
    combined = writer(:combined)
    200.times do
      combined.record(ENV_GET.merge("REQUEST_URI" => sample.call, "HTTP_USER_AGENT" => sample.call,
                                    "REMOTE_USER" => sample.call), 200, {}, 1, 0.1, nil)
    end
    assert_equal 200, lines.size
    lines.each { |l| assert_match COMBINED, l }
    @log.close
    File.write(@path, "")
    json = writer(:json)
    sent = Array.new(200) { sample.call }
    sent.each { |ua| json.record(ENV_GET.merge("HTTP_USER_AGENT" => ua), 200, {}, 1, 0.1, nil) }
    got = lines.map { |l| JSON.parse(l)["user_agent"] }
    assert_equal 200, got.size
    sent.zip(got).each do |ua, logged|
      utf8 = ua.dup.force_encoding(Encoding::UTF_8)
      assert_equal utf8.valid_encoding? ? utf8 : ua.bytes.map { |b| b.chr(Encoding::UTF_8) }.join, logged
    end
  end

  def test_json_takes_surrogates_and_overlong_forms_as_bytes
    env = ENV_GET.merge("HTTP_USER_AGENT" => "\xED\xA0\x80".b, "HTTP_REFERER" => "\xC0\xAF".b,
                        "REMOTE_USER" => "\xF4\x90\x80\x80".b, "REQUEST_URI" => "/\xF0\x9F\x90\xB3".b)
    writer(:json).record(env, 200, nil, 0, nil, nil)
    entry = JSON.parse(lines.first)
    assert_equal ["\u00ed\u00a0\u0080", "\u00c0\u00af", "\u00f4\u0090\u0080\u0080", "/\u{1F433}"],
                 entry.values_at("user_agent", "referer", "remote_user", "uri")
  end

  def test_a_failing_write_is_logged_not_raised
    log = writer(:combined)
    access = @log
    access.close
    @log = nil
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    access.flush
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    access.flush
    assert_equal 1, @errors.string.scan(/access_log #{Regexp.escape(@path)}: IOError/).size, @errors.string
  end

  def test_lines_are_gathered_then_go_out_together
    log = writer(:combined)
    3.times { log.record(ENV_GET, 200, {}, 1, 0.1, nil) }
    assert_equal 0, File.size(@path), "gathered, not written one by one"
    @log.flush
    assert_equal 3, File.readlines(@path).size
  end

  def test_the_buffer_is_written_before_it_would_pass_its_bound
    log = writer(:combined)
    long = ENV_GET.merge("REQUEST_URI" => "/#{'a' * 10_000}")
    4.times { log.record(long, 200, {}, 1, 0.1, nil) } # 3 fit in 32 KiB
    assert_equal 3, File.readlines(@path).size
    log.record(ENV_GET.merge("REQUEST_URI" => "/#{'b' * 40_000}"), 200, {}, 1, 0.1, nil) # alone: past the bound
    assert_equal 5, File.readlines(@path).size
    assert(lines.all? { |l| COMBINED.match?(l) })
  end

  # INT/TERM's handler writes what waits, then exit!s. It may run while a
  # thread is inside a flush whose write(2) is already done: on the same
  # thread (the handler interrupts it) or on another (it holds the lock).
  # Each line is written once.
  def test_an_exit_during_a_flush_writes_each_line_once
    written = []
    buffer = nil
    exit_during_write = lambda do |bytes|
      written << bytes.dup
      buffer.flush_at_exit if written.size == 1
    end
    buffer = Narwhal::AccessLog::Buffer.new(exit_during_write, 1024)
    buffer << "one\n"
    buffer.flush
    assert_equal ["one\n"], written
  end

  # The flush on another thread, stopped inside its write(2) with the lock
  # held: a Fiber plays it (a Mutex belongs to the fiber that locked it),
  # so no native thread is made (the parser's AddressSanitizer run loads
  # this file, and ASan trips over the signal stack of a Ruby thread that
  # ends).
  def test_an_exit_while_another_thread_flushes_writes_each_line_once
    written = []
    flusher = nil
    out = lambda do |bytes|
      written << bytes.dup
      Fiber.yield :wrote if Fiber.current.equal?(flusher) # its write(2) done, the lock still held
    end
    buffer = Narwhal::AccessLog::Buffer.new(out, 1024)
    buffer << "one\n"
    flusher = Fiber.new { buffer.flush }
    assert_equal :wrote, flusher.resume
    buffer.flush_at_exit
    flusher.resume
    assert_equal ["one\n"], written
  end

  def test_a_file_that_cannot_be_opened_is_a_boot_error
    e = assert_raises(Narwhal::BootError) { Narwhal::AccessLog.open(File.join(@dir, "no/such.log"), :json, nil) }
    assert_equal "cannot open access_log #{@dir}/no/such.log: no such file or directory", e.message
  end

  def test_a_line_in_one_write_on_an_append_only_file
    log = writer(:combined)
    file = @log.instance_variable_get(:@file)
    assert_equal File::APPEND, file.fcntl(Fcntl::F_GETFL) & File::APPEND
    assert Narwhal::System::LogReopener.reopenable?(file), "USR1 reopens it"
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    assert_equal 1, lines.size
  end
end
