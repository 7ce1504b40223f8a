# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# The reactor with fake handlers: it calls them when their descriptor is
# readable, writable or their deadline passed, and does what they answer
# (its parts have files of their own under reactor/).
class ReactorTest < Minitest::Test
  include Narwhal::ReactorHarness

  def test_keep_leaves_the_handler_registered_for_the_next_bytes
    accept_with(%i[keep close])
    client = connect("one")
    running do
      wait_for("read once") { @handlers.first&.calls == [:readable] }
      client.write("two")
      wait_for("read again, then closed") { @handlers.first.calls == %i[readable readable close] }
    end
  end

  def test_release_forgets_the_socket_without_closing_it
    accept_with(%i[release])
    connect("x")
    run_until("released") { @handlers.first&.calls == [:readable] && @reactor.instance_variable_get(:@handlers).empty? }
    refute @handlers.first.io.closed?, "a released socket belongs to someone else"
  end

  def test_a_failing_handler_is_logged_and_dropped_and_the_loop_goes_on
    accept_with([RuntimeError.new("bug")], %i[close])
    connect("a")
    connect("b")
    run_until("both handled") { @handlers.size == 2 && @handlers.all? { |h| h.calls.include?(:close) } }
    assert_match(/internal error: RuntimeError: bug\n/, @log.string)
  end

  def test_write_calls_on_writable_until_keep_then_the_handler_is_read_again
    accept_writing(%i[write write keep])
    connect("request")
    run_until("written, read again, closed") { @handlers.first&.calls&.include?(:close) }
    assert_equal %i[readable writable writable writable readable close], @handlers.first.calls
  end

  def test_write_waits_for_the_socket_to_take_bytes
    accept_writing([], fill: true, deadline: Narwhal::Clock.now + 0.5)
    connect("request")
    run_until("timed out while the client read nothing") { @handlers.first&.calls&.include?(:close) }
    assert_equal %i[readable timeout close], @handlers.first.calls, "never writable: the client reads nothing"
  end

  def test_a_writing_handler_can_close
    accept_writing(%i[write close])
    connect("request")
    run_until("closed") { @handlers.first&.calls&.include?(:close) }
    assert_equal %i[readable writable writable close], @handlers.first.calls
  end

  def test_a_watched_pipe_runs_its_block
    r, w = IO.pipe
    woken = 0
    @reactor.watch(r) do
      r.read_nonblock(10)
      woken += 1
    end
    accept_with
    w.write("!")
    run_until("the block ran") { woken == 1 }
  ensure
    r&.close
    w&.close
  end

  def test_with_threads_each_report_goes_to_one_thread_which_has_the_handler_until_it_answers
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: OpenGate.new)
    release = Queue.new
    @reactor.add_listener(@listener) { |sock| GatedHandler.new(sock, release).tap { |h| @handlers << h } }
    client = connect("one")
    running_threads(3) do
      wait_for("read on a loop thread") { @handlers.first&.threads&.size == 1 }
      client.write("two") # the other threads are idle: none may take it while the first has it
      sleep 0.05 # nothing must happen meanwhile (a condition cannot show that nothing happens)
      assert_equal 1, @handlers.first.threads.size
      release << true
      wait_for("read again once answered") { @handlers.first.threads.size == 2 }
      release << true
      client.write("three")
      wait_for("and again") { @handlers.first.threads.size == 3 }
      release << true
    end
    assert_equal 1, @handlers.first.most_at_once
    assert(@handlers.first.threads.all? { |name| name.start_with?("narwhal request ") })
  end

  # The thread had taken a report: it must not stay counted as a serving
  # thread either, or the thread waiting in epoll_wait would hold every
  # later report for it (Poller#wait).
  def test_with_threads_a_thread_the_app_ends_closes_its_connection_and_is_replaced
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: OpenGate.new)
    poller = @reactor.instance_variable_get(:@poller)
    ender = Class.new(FakeHandler) do
      def on_readable
        @calls << :readable
        Thread.current.exit if @io.read_nonblock(1024, exception: false) == "exit"
        :keep
      end
      def awaiting_first_request? = false
    end
    @reactor.add_listener(@listener) { |sock| ender.new(sock).tap { |h| @handlers << h } }
    connect("exit")
    running_threads(1) do
      wait_for("the connection whose thread ended is closed") { @handlers.first&.calls&.last == :close }
      connect("next")
      # read once or more: its bytes may come after it is accepted
      wait_for("served by the thread started in its place") { @handlers.size == 2 && @handlers.last.calls.uniq == [:readable] }
      wait_for("no thread serves once all wait again") { poller.serving.zero? }
    end
    assert_match(/request thread 0 was ended by the app; starting another/, @log.string)
  end

  # With request threads: a thread whose handler's socket was taken and
  # closed (a hijack) before the handler answered RELEASE. A connection
  # accepted meanwhile on another thread gets the same descriptor number:
  # it is served, and still watched after the release.
  def test_a_released_socket_closed_early_leaves_the_next_one_on_its_number_alone
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: OpenGate.new)
    release = Queue.new
    hijacker = Class.new(FakeHandler) do
      attr_accessor :release
      attr_reader :number

      def on_readable
        @calls << :readable
        @number = @io.fileno
        @io.close
        @release.pop
        :release
      end
      def awaiting_first_request? = false
    end
    reader = Class.new(FakeHandler) do
      def data = @data ||= +""

      def on_readable
        @calls << :readable
        bytes = @io.read_nonblock(1024, exception: false)
        data << bytes if bytes.is_a?(String)
        :keep
      end
      def awaiting_first_request? = false
    end
    scripts = [->(sock) { hijacker.new(sock).tap { |h| h.release = release } }, ->(sock) { reader.new(sock) }]
    @reactor.add_listener(@listener) { |sock| scripts.shift.call(sock).tap { |h| @handlers << h } }
    connect("request")
    late = Socket.new(:INET, :STREAM) # made first: it must not take the number
    @clients << late
    running_threads(2) do
      wait_for("the first socket taken and closed") { @handlers.first&.io&.closed? }
      late.connect(Socket.sockaddr_in(@server.addr[1], "127.0.0.1"))
      late.write("a")
      wait_for("the next connection accepted and read") { @handlers.size == 2 && @handlers.last.data == "a" }
      assert_equal @handlers.first.number, @handlers.last.io.fileno, "accepted on the closed socket's number"
      release << true
      wait_for("released") { !@reactor.instance_variable_get(:@handlers).key?(@handlers.first) }
      late.write("b")
      wait_for("the next connection read again") { @handlers.last.data == "ab" }
    end
    refute_match(/internal error/, @log.string)
  end

end
