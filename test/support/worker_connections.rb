# frozen_string_literal: true

module Narwhal
  # Kept-alive connections placed on a chosen worker of a multi-worker
  # server (@server, a ServerProcess) whose app answers /pid with the
  # worker's pid first in its body. New connections go to whichever
  # worker takes them: one is opened until it lands where asked. Every
  # connection is kept in @clients, for teardown to close.
  module WorkerConnections
    # Connections tried before giving up on a worker.
    TRIES = 50

    def get(client, path)
      client.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n")
      client.read_response
    end

    def connect
      @server.connect.tap { |c| @clients << c }
    end

    # [a new kept-alive connection, the pid of the worker it is on]
    def connection_on_a_worker
      first = connect
      [first, get(first, "/pid").body.split.first]
    end

    # A new kept-alive connection on worker pid.
    def connection_to(pid)
      TRIES.times do
        other = connect
        return other if get(other, "/pid").body.split.first == pid
      end
      flunk "no connection landed on worker #{pid}"
    end
  end
end
