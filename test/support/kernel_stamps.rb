# frozen_string_literal: true

require "socket"

module Narwhal
  # The first socket that asks for receive stamps (Arrival) turns them on
  # for the whole kernel a moment later (a deferred switch): bytes that
  # arrive before get none. A test that needs a stamp on its first bytes
  # waits until a stamped pair's bytes come with one.
  module KernelStamps
    def wait_for_kernel_stamps
      wait_until(timeout: 5, message: "the kernel's receive stamps on") { kernel_stamps_on? }
    end

    def kernel_stamps_on?
      listener = TCPServer.new("127.0.0.1", 0)
      Arrival.enable(listener.fileno)
      client = TCPSocket.new("127.0.0.1", listener.addr[1])
      server = listener.accept
      client.write("!")
      IO.select([server], nil, nil, 1)
      stamp = Arrival.recv(server.fileno, +"", 8)
      stamp.is_a?(Float) && stamp.positive?
    ensure
      [server, client, listener].each { |io| io&.close }
    end
  end
end
