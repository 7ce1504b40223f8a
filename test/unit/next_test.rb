# frozen_string_literal: true

require "test_helper"
require "logger"
require "support/fake_counters"

# Narwhal::Next: the one vocabulary every layer answers with, from the
# response writer up to the reactor.
class NextTest < Minitest::Test
  NAMES = %i[KEEP WRITE CLOSE RELEASE].freeze

  def test_four_distinct_steps
    values = NAMES.map { |name| Narwhal::Next.const_get(name) }
    assert_equal %i[keep write close release], values
    assert_equal NAMES.sort, Narwhal::Next.constants.sort
  end

  def test_every_layer_answers_with_the_same_values
    layers = { Narwhal::ResponseWriter => %i[KEEP CLOSE RELEASE], Narwhal::Responder => %i[KEEP CLOSE RELEASE],
               Narwhal::Connection => NAMES, Narwhal::Reactor => NAMES }
    layers.each do |layer, names|
      names.each { |name| assert_same Narwhal::Next.const_get(name), layer.const_get(name), "#{layer}::#{name}" }
    end
  end

  # What the C loop answers for what it served itself is in these words too.
  def test_the_request_loop_answers_keep_or_close
    server, client = UNIXSocket.pair
    slot = Narwhal::Scoreboard.new(1).thread_slot(0, 0)
    responder = Narwhal::Responder.new(->(_env) { [200, {}, ["ok"]] }, Logger.new(nil), slot, FakeCounters.new)
    request = Narwhal::Request.new({ "SCRIPT_NAME" => "" }, Narwhal::SocketWriter.new(server, 5), "127.0.0.1")
    limits = Narwhal::Server::Limits.new(body_buffer_size: 1024, max_body_size: 1024, max_request_line: 1024,
                                         max_header_size: 4096, max_header_fields: 50, keepalive_timeout: 5,
                                         keepalive_requests: 100, client_header_timeout: 5,
                                         client_body_timeout: 5, write_timeout: 5)
    dispatcher = Narwhal::Dispatcher::Inline.new(responder)
    context = Narwhal::Connection::Context.new(limits, dispatcher, Logger.new(nil), FakeCounters.new, false)
    connection = Narwhal::Connection.new(server, request, context)
    client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_same Narwhal::Next::KEEP, connection.on_readable
    client.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_same Narwhal::Next::CLOSE, connection.on_readable
  ensure
    server&.close
    client&.close
  end
end
