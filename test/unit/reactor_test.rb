# frozen_string_literal: true

require "test_helper"
require "socket"
require "logger"
require "delegate"

# The reactor with fake handlers: it calls them when their descriptor is
# readable or their deadline passed, and does what they answer.
class ReactorTest < Minitest::Test
  # Answers each callback from a script; records what happened to it.
  class FakeHandler
    attr_reader :calls, :io
    attr_accessor :deadline, :idle, :answers

    def initialize(io, answers: [], deadline: Narwhal::Clock.now + 60, idle: false)
      @io = io
      @answers = answers
      @deadline = deadline
      @idle = idle
      @calls = []
    end

    def on_readable
      @calls << :readable
      @io.read_nonblock(1024, exception: false)
      answer = @answers.shift || :keep
      raise answer if answer.is_a?(Exception)

      answer
    end

    def on_timeout
      @calls << :timeout
      @deadline = Narwhal::Clock.now + 60
      @answers.shift || :close
    end

    def idle?
      @idle
    end

    def silent?
      false
    end

    def close
      @calls << :close
      @io.close
    end
  end

  # A listener as the reactor sees one.
  class FakeListener
    attr_reader :io

    def initialize(io)
      @io = io
    end

    def accept_nonblock
      @io.accept_nonblock(exception: false)
    end
  end

  # A Connection::Factory whose loop accepts: its first accept(2) fails
  # for want of descriptors, then it serves each connection and closes it.
  class ServingFactory
    def initialize(server)
      @server = server
      @tries = 0
    end

    def call(_sock)
      raise "accepted in Ruby"
    end

    def accept_served
      raise Errno::EMFILE if (@tries += 1) == 1

      sock = @server.accept_nonblock(exception: false)
      return nil if sock == :wait_readable

      sock.write("served")
      sock.close
      false
    end
  end

  def setup
    @log = StringIO.new
    @reactor = Narwhal::Reactor.new(Logger.new(@log))
    @server = TCPServer.new("127.0.0.1", 0)
    @listener = FakeListener.new(@server)
    @handlers = []
    @clients = []
  end

  def teardown
    @clients.each { |c| c.close unless c.closed? }
    @server.close unless @server.closed?
  end

  # Handlers for accepted sockets answer with the scripts given in order.
  def accept_with(*scripts, **options)
    @reactor.add_listener(@listener) do |sock|
      FakeHandler.new(sock, answers: scripts.shift || [], **options).tap { |h| @handlers << h }
    end
  end

  def connect(bytes = nil)
    client = TCPSocket.new("127.0.0.1", @server.addr[1])
    client.write(bytes) if bytes
    @clients << client
    client
  end

  def test_a_connection_the_loop_served_and_closed_ends_a_back_off
    @reactor.add_listener(@listener, ServingFactory.new(@server))
    running do
      client = connect
      assert client.wait_readable(5), "served once the back-off is over"
      assert_equal "served", client.read
    end
    assert_match(/accept failed: too many open files/, @log.string)
    assert_match(/accepting again after [\d.]+s of failed accepts/, @log.string)
  end

  # Runs the loop in a thread for the block, then stops it.
  def running
    thread = Thread.new { @reactor.run }
    yield
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  def wait_for(message, timeout: 10)
    deadline = Narwhal::Clock.now + timeout
    sleep 0.01 until yield || Narwhal::Clock.now > deadline
    assert yield, message
  end

  def run_until(message, &condition)
    running { wait_for(message, &condition) }
  end

  def test_an_accepted_socket_is_read_at_once_and_close_is_done_by_the_reactor
    accept_with(%i[close])
    connect("hello")
    run_until("the handler was read and closed") { @handlers.first&.calls == %i[readable close] }
  end

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

  def test_a_passed_deadline_calls_on_timeout_and_its_answer_is_done
    accept_with([], deadline: Narwhal::Clock.now - 1)
    connect
    run_until("timed out and closed") { @handlers.first&.calls&.include?(:close) }
    assert_equal %i[timeout close], @handlers.first.calls - [:readable]
  end

  def test_a_failing_handler_is_logged_and_dropped_and_the_loop_goes_on
    accept_with([RuntimeError.new("bug")], %i[close])
    connect("a")
    connect("b")
    run_until("both handled") { @handlers.size == 2 && @handlers.all? { |h| h.calls.include?(:close) } }
    assert_match(/internal error: RuntimeError: bug\n/, @log.string)
  end

  def test_a_paused_reactor_accepts_nothing_until_resumed
    accept_with(%i[close])
    @reactor.pause_accepting
    connect("x")
    running do
      # a connection waits in the backlog: for half a second the loop must
      # not take it (this waits on purpose, to see nothing happen)
      deadline = Narwhal::Clock.now + 0.5
      sleep 0.01 while Narwhal::Clock.now < deadline && @handlers.empty?
      assert_empty @handlers, "accepted while paused"
      @reactor.resume_accepting
      wait_for("accepted once resumed") { @handlers.any? }
    end
  end

  def test_retire_leaves_idle_handlers_until_their_deadline_then_run_returns
    accept_with([], idle: true, deadline: Narwhal::Clock.now + 3)
    connect("x")
    thread = Thread.new { @reactor.run }
    wait_for("accepted") { @handlers.any? }
    let_go = false
    @reactor.retire(drain: true) { let_go = true }
    wait_for("the listeners let go: nothing waits to be accepted") { let_go }
    refute_includes @handlers.first.calls, :close, "an idle connection may have a request on its way"
    assert thread.join(10), "the loop ends once no handler is left"
    assert_equal %i[readable timeout close], @handlers.first.calls
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  def test_retire_without_drain_takes_nothing_more_another_process_serves_the_queue
    accept_with(%i[close])
    @reactor.pause_accepting
    connect("x")
    thread = Thread.new { @reactor.run }
    @reactor.retire
    assert thread.join(10), "the loop ends with no handler"
    assert_empty @handlers
    waiting = @server.accept_nonblock(exception: false)
    refute_equal :wait_readable, waiting, "the connection is still in the listen queue"
    waiting.close
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  def test_retire_takes_what_waits_in_the_listen_queue_before_letting_go_of_the_listeners
    accept_with(%i[close], %i[close], %i[close])
    @reactor.pause_accepting
    3.times { connect("x") }
    thread = Thread.new { @reactor.run }
    taken_before_let_go = nil
    @reactor.retire(drain: true) { taken_before_let_go = @handlers.size }
    assert thread.join(10), "the loop ends once the queue is drained and no handler is left"
    assert_equal 3, taken_before_let_go, "every waiting connection taken first"
    assert(@handlers.all? { |h| h.calls == %i[readable close] })
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  # Connections that arrive once the drain began are not its to take:
  # clients that keep connecting would keep it from ever ending.
  def test_retire_takes_only_what_the_listen_queue_held_when_it_began
    accept_with(%i[close], %i[close], %i[close], %i[close], %i[close])
    @reactor.pause_accepting
    3.times { connect("x") }
    wait_for("3 connections queued") { Narwhal::System::ListenQueue.new.depths([@server])[@server]&.first == 3 }
    taken_before_let_go = nil
    @reactor.retire(drain: true) { taken_before_let_go = @handlers.size }
    2.times { connect("x") }
    thread = Thread.new { @reactor.run }
    assert thread.join(10), "the loop ends once the 3 are served"
    assert_equal 3, taken_before_let_go
    assert_equal 3, @handlers.size, "the 2 that came later were left in the queue"
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  # Asks to WRITE without reading what came; then answers on_writable from
  # its own script; reads (and closes) once it is read again.
  class WritingHandler < FakeHandler
    attr_accessor :writes, :fill

    def on_readable
      return super unless @calls.empty?

      @calls << :readable # the bytes stay unread: only WRITE keeps them from being read again
      true while @fill && @io.write_nonblock("x" * 65_536, exception: false) != :wait_writable
      :write
    end

    def on_writable
      @calls << :writable
      @writes.shift || :keep
    end
  end

  def accept_writing(writes, fill: false, **options)
    @reactor.add_listener(@listener) do |sock|
      WritingHandler.new(sock, answers: %i[close], **options).tap do |h|
        h.writes = writes.dup
        h.fill = fill
        @handlers << h
      end
    end
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

  # A gate that always lets the reactor accept (request threads' mode).
  class OpenGate
    attr_reader :seen

    def initialize
      @seen = []
    end

    def open?(_now, _starting = 0) = true
    def alone? = true
    def recheck_in = nil
    def listening(_on); end
    def siblings? = false
    def crowd_welcome? = true
    def crowd_room(_held) = Narwhal::Reactor::Acceptors::CROWD_MAX
    def holding(_count); end

    def accepted(handler, _now)
      @seen << handler
    end
  end

  # A handler whose reads wait for the test to let them go, and that says
  # on which thread and how many at once they ran.
  class GatedHandler < FakeHandler
    attr_reader :threads, :most_at_once

    def initialize(io, gate)
      super(io)
      @gate = gate
      @threads = []
      @at_once = 0
      @most_at_once = 0
      @lock = Mutex.new
    end

    def on_readable
      @lock.synchronize { @most_at_once = [@most_at_once, @at_once += 1].max }
      @threads << Thread.current.name
      answer = super
      @gate.pop # the bytes are read: more come while this thread still has the handler
      answer
    ensure
      @lock.synchronize { @at_once -= 1 }
    end

    def awaiting_first_request? = false
  end

  # Runs the loop with request threads for the block, then stops it.
  def running_threads(count)
    thread = Thread.new { @reactor.run(threads: count) { |i| Thread.current[:index] = i } }
    yield
  ensure
    @reactor.close_all
    thread&.join(5)
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

  # A gate whose sibling holds fewer connections: a crowded worker's share
  # of a crowd is none (crowd_room 0) until the test gives it room.
  class NoRoomGate < OpenGate
    attr_accessor :room
    attr_reader :listenings

    def initialize
      super
      @room = 0
      @listenings = []
    end

    def crowd_room(_held) = @room
    def listening(on) = @listenings << on
  end

  # Both threads hold a connection, a third waits in the listen queue, and
  # a sibling is to take it: the thread that comes back from its request
  # gets the listener's report and takes nothing. The listeners must leave
  # the set (the sibling, told so, stops leaving the crowd to this worker),
  # not come back ready to every thread at once, and return when there is
  # room again.
  def test_with_threads_a_worker_whose_crowd_share_is_taken_stops_listening_until_it_has_room
    gate = NoRoomGate.new
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: gate)
    release = Queue.new
    @reactor.add_listener(@listener) { |sock| GatedHandler.new(sock, release).tap { |h| @handlers << h } }
    running_threads(2) do
      connect("one")
      connect("two")
      wait_for("both threads hold a connection") { @handlers.size == 2 && @handlers.all? { |h| h.threads.size == 1 } }
      connect("three")
      release << true # a thread comes back while the other still has its handler
      wait_for("the listeners left the set") { gate.listenings.last == false }
      assert_equal 2, @handlers.size, "no connection taken without room"
      gate.room = 1
      release << true
      wait_for("room again: the third is let in") { @handlers.size == 3 }
      3.times { release << true }
    end
  end

  # The sweep read a deadline that had passed, but before it could claim the
  # connection its thread served a request and set a new one: the
  # connection is not timed out, and stays armed for its next request.
  def test_with_threads_the_sweep_times_out_only_what_is_still_past_its_deadline
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: OpenGate.new)
    refreshed = Class.new(FakeHandler) do
      attr_reader :looks

      def deadline
        @looks = (@looks || 0) + 1
        @looks == 1 ? Narwhal::Clock.now - 1 : Narwhal::Clock.now + 60 # moved on once looked at
      end
      def awaiting_first_request? = false
    end
    @reactor.add_listener(@listener) { |sock| refreshed.new(sock).tap { |h| @handlers << h } }
    client = connect("one")
    running_threads(2) do
      wait_for("swept twice", timeout: 5) { @handlers.first&.looks.to_i >= 3 }
      refute_includes @handlers.first.calls, :timeout
      client.write("two")
      wait_for("read again: still armed") { @handlers.first.calls.count(:readable) == 2 }
    end
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

  # With threads, a connection epoll refuses once its first request was
  # read is closed: the gate must not count it as a new connection that
  # claims a thread.
  def test_with_threads_a_connection_epoll_refuses_is_not_counted_as_accepted
    gate = OpenGate.new
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: gate)
    poller = @reactor.instance_variable_get(:@poller)
    @reactor.instance_variable_set(:@poller, RefusingPoller.new(poller, Errno::ENOMEM.new, @server.fileno))
    fresh = Class.new(FakeHandler) { def awaiting_first_request? = true }
    @reactor.add_listener(@listener) { |sock| fresh.new(sock).tap { |h| @handlers << h } }
    connect("a")
    running_threads(1) do
      wait_for("read, then closed") { @handlers.first&.calls == %i[readable close] }
    end
    assert_empty gate.seen
  end

  def test_at_max_handlers_the_oldest_idle_connection_makes_room
    @reactor = Narwhal::Reactor.new(Logger.new(@log), max_handlers: 2)
    accept_with([], [], [], idle: true)
    running do
      connect("a")
      wait_for("first") { @handlers.size == 1 }
      connect("b")
      wait_for("second") { @handlers.size == 2 }
      connect("c")
      # and the third registered (read): the test stops the loop from another
      # thread, which must not happen in the middle of an accept
      wait_for("third, and the oldest idle closed") do
        @handlers.size == 3 && @handlers.first.calls.include?(:close) && @handlers.last.calls.include?(:readable)
      end
      refute_includes @handlers[1].calls, :close
    end
  end

  def test_at_max_handlers_with_none_idle_accepting_waits_until_one_turns_idle
    @reactor = Narwhal::Reactor.new(Logger.new(@log), max_handlers: 1)
    accept_with(%i[keep keep keep], [])
    running do
      connect("a")
      wait_for("first") { @handlers.size == 1 }
      connect("b")
      sleep 0.05 # the second must wait in the listen queue
      assert_equal 1, @handlers.size
      @handlers.first.idle = true # its request done: kept alive, idle
      wait_for("room again: the second accepted (and read), the idle one closed") do
        @handlers.size == 2 && @handlers.first.calls.include?(:close) && @handlers.last.calls.include?(:readable)
      end
    end
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

  # The reactor's Poller, which refuses to register the next accepted
  # socket once with error (epoll_ctl: ENOMEM, or ENOSPC past
  # fs.epoll.max_user_watches). A connection served at once joins the set
  # when it first waits (#modify); one taken to be served later, at once
  # (#add).
  class RefusingPoller < SimpleDelegator
    def initialize(poller, error, listener_fd)
      super(poller)
      @error = error
      @listener_fd = listener_fd
    end

    def add(fd, events)
      refuse(fd)
      __getobj__.add(fd, events)
    end

    def modify(fd, events)
      refuse(fd)
      __getobj__.modify(fd, events)
    end

    private

    def refuse(fd)
      return unless @error && fd != @listener_fd

      error = @error
      @error = nil
      raise error
    end
  end

  [Errno::ENOMEM, Errno::ENOSPC].each do |error|
    define_method("test_a_socket_epoll_refuses_(#{error.name.split('::').last})_is_closed_and_the_loop_goes_on") do
      poller = @reactor.instance_variable_get(:@poller)
      @reactor.instance_variable_set(:@poller, RefusingPoller.new(poller, error.new, @server.fileno))
      accept_with(%i[keep], %i[close])
      refused = connect("a")
      running do
        assert refused.wait_readable(10), "the refused client hears from the server"
        closed = begin
          refused.read_nonblock(1, exception: false).nil?
        rescue Errno::ECONNRESET # it had sent bytes we never read
          true
        end
        assert closed, "closed, not left open"
        assert_equal [%i[readable close]], @handlers.map(&:calls), "its request was read, then the handler closed"
        connect("b")
        wait_for("the next connection is served") { @handlers.size == 2 && @handlers.last.calls == %i[readable close] }
      end
      assert_match(/accept failed: .*#{Regexp.escape(error.new.message)}.*; pausing accepts/i, @log.string)
    end
  end
end
