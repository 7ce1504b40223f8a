# frozen_string_literal: true

module Narwhal
  # A connection's writer as the Responder sees it, collecting what would
  # go to the socket (or raising fail_with on every write).
  class FakeOut
    attr_reader :bytes, :io

    def initialize(fail_with: nil)
      @bytes = +""
      @io = :the_socket
      @fail_with = fail_with
    end

    def write(str)
      raise @fail_with if @fail_with

      @bytes << str
    end

    def flush; end

    # no socket: the scoreboard is told -1
    def fileno = -1
  end
end
