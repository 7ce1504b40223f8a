# frozen_string_literal: true

require "test_helper"
require "socket"

# Narwhal::Request::Threaded: with request threads the server's side of
# keep-alive is looked at again when the head is written, after the app
# returned: a stop begun meanwhile, or a shed, makes it the last response.
class RequestThreadedTest < Minitest::Test
  KEEP = Narwhal::Request::HTTP11 | Narwhal::Request::KEEPALIVE
  Context = Struct.new(:stopping, :shedding, :limits)
  Shedding = Struct.new(:shed) do
    def shed?
      raise "shedding asked about a response that closes anyway" if shed == :not_to_be_asked

      shed
    end
  end

  def setup
    @sock, @peer = UNIXSocket.pair
    @shedding = Shedding.new(false)
    @context = Context.new(false, @shedding, nil)
    @request = Narwhal::Request::Threaded.new({ "SCRIPT_NAME" => "" }, Narwhal::SocketWriter.new(@sock, 5),
                                              "127.0.0.1", false, @context)
    @request.start["REQUEST_METHOD"] = "GET"
    @request.complete(nil, true, true)
  end

  def teardown
    [@sock, @peer].each(&:close)
  end

  def test_kept_alive_while_nothing_changed
    assert_equal KEEP, @request.flags
  end

  def test_a_shed_response_closes_its_connection
    @shedding.shed = true
    assert_equal Narwhal::Request::HTTP11, @request.flags
  end

  def test_a_stop_begun_while_the_app_ran_closes_it
    @context.stopping = true
    assert_equal Narwhal::Request::HTTP11, @request.flags
  end

  def test_a_response_that_closes_anyway_asks_no_shed
    @request.complete(nil, true, false)
    @shedding.shed = :not_to_be_asked
    assert_equal Narwhal::Request::HTTP11, @request.flags
  end
end
