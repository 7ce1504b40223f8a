# frozen_string_literal: true

require "test_helper"
require "rbconfig"

# A worker killed for `timeout` answers first: the request that ran too
# long gets 504 Gateway Timeout (its client and a proxy in front see an
# answer, not a reset), a request that waited behind it on a kept-alive
# connection gets 503, and the log shows where the app was stuck, taken
# shortly before the kill. All of it works when the app is stuck in C
# with the GVL held, where no Ruby code of the worker can run: a busy
# loop in a native library and a sleep(3) called through Fiddle.
class TimeoutAnswerIntegrationTest < Minitest::Test
  TIMEOUT = 2

  SPIN_C = <<~C
    /* a native busy loop: never returns */
    void spin_forever(void) { for (;;) __asm__ volatile(""); }
  C

  # /spin: a busy loop in C; /csleep: sleep(3) in C; both with the GVL
  # held (Fiddle's need_gvl). /rsleep: Ruby's sleep. /: answers.
  APP = <<~'RU'
    require "fiddle"
    SPIN = Fiddle::Function.new(Fiddle.dlopen(File.expand_path("libspin.so"))["spin_forever"], [],
                                Fiddle::TYPE_VOID, need_gvl: true)
    CSLEEP = Fiddle::Function.new(Fiddle::Handle::DEFAULT["sleep"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT,
                                  need_gvl: true)
    def stuck_in_ruby = sleep(60)

    run lambda { |env|
      File.write("in#{env['PATH_INFO'].tr('/', '_')}", "") # the test waits for it
      case env["PATH_INFO"]
      when "/spin" then SPIN.call
      when "/csleep" then CSLEEP.call(60)
      when "/rsleep" then stuck_in_ruby
      end
      [200, { "content-type" => "text/plain", "content-length" => "2" }, ["ok"]]
    }
  RU

  def start(threads: 1)
    dir = Dir.mktmpdir("narwhal-spin")
    File.write(File.join(dir, "spin.c"), SPIN_C)
    assert system(RbConfig::CONFIG["CC"] || "cc", "-shared", "-fPIC", "-O0", "-o", File.join(dir, "libspin.so"),
                  File.join(dir, "spin.c")), "the test's native library builds"
    @server = Narwhal::ServerProcess.start(
      app: APP, config: "worker_processes 1\nthreads #{threads}\ntimeout #{TIMEOUT}\n",
      files: { "libspin.so" => File.binread(File.join(dir, "libspin.so")) }
    )
  ensure
    FileUtils.rm_rf(dir) if dir
  end

  def teardown
    @server&.stop
  end

  def stuck(path)
    @server.connect.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n")
  end

  def assert_answered_504(client, path)
    response = client.read_response(timeout: TIMEOUT + 5)
    assert_equal 504, response.status, path
    assert_equal "close", response.headers["connection"]
    assert client.closed?
  end

  def test_a_request_stuck_in_c_with_the_gvl_held_gets_504_and_the_log_shows_where
    start
    waiting = @server.connect
    waiting.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 200, waiting.read_response.status
    client = stuck("/spin")
    wait_until(message: "the worker in /spin") { File.exist?(File.join(@server.dir, "in_spin")) }
    waiting.write("GET /after HTTP/1.1\r\nHost: t\r\n\r\n") # waits behind the stuck request
    assert_answered_504(client, "/spin")
    response = waiting.read_response(timeout: 5)
    assert_equal 503, response.status, "the request that waited for the worker"
    assert_equal "close", response.headers["connection"]
    log = wait_until(message: "the timeout logged") { @server.log[/timeout.*killing.*\n/] && @server.log }
    assert_match(%r{GET /spin}, log)
    assert_match(/answered 504 to 1 request, 503 to 1 waiting/, log)
    backtrace = Regexp.new('GET /spin has run \d+\.\d+s, past timeout \(2s\); where it is \(tid=\d+\):\n' \
                           '(?:.*\n)*?narwhal: backtrace of pid=\d+ tid=\d+, innermost frame first:\n' \
                           '(?:    .*\n)*?    .*config\.ru:\d+:in')
    assert_match(backtrace, log, "a backtrace into the app, before the kill")
    assert_match(/spin_forever|call/, log)
    assert_equal 200, @server.get("/").status, "a new worker serves"
  end

  # One after the other: with the GVL held by the first, a second thread
  # could not even start its request.
  def test_sleep_in_a_c_call_with_the_gvl_held_and_in_ruby_each_get_504
    start(threads: 2)
    assert_answered_504(stuck("/csleep"), "/csleep")
    wait_until(message: "a new worker") { @server.log.scan(Narwhal::ServerProcess::READY_LINE).size == 2 }
    assert_answered_504(stuck("/rsleep"), "/rsleep")
    log = wait_until(message: "the second kill logged") { @server.log.scan(/, killing;/).size == 2 && @server.log }
    assert_match(/in `call'\n.*config\.ru:\d+/, log, "the C call's frame, then the app's")
    assert_match(/in `sleep'\n.*config\.ru:\d+:in `stuck_in_ruby'/, log, "the Ruby frame of the request stuck in Ruby")
    assert_equal 200, @server.get("/").status
  end
end
