# frozen_string_literal: true

# What the request-threads tests share: clients stopped with the server,
# a GET on a kept-alive connection, the files their apps use to hold and
# release requests, and the kernel's view of the sockets (/proc/net/tcp).
module ThreadsClient
  # /pid: the worker's pid; /block/NAME: marks "started-NAME" in the
  # server's directory, waits for "release-NAME" (20 s at most), then
  # answers the worker's pid as /pid does.
  BLOCKING_APP = <<~'RUBY'
    run lambda { |env|
      path = env["PATH_INFO"]
      if path.start_with?("/block/")
        name = path.delete_prefix("/block/")
        File.write("started-#{name}", "")
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
        sleep 0.005 until File.exist?("release-#{name}") || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      end
      [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
    }
  RUBY

  def teardown
    @clients&.each(&:close)
    @server&.stop
  end

  # A RawClient closed at teardown.
  def client
    c = @server.connect
    (@clients ||= []) << c
    c
  end

  def get(c, path, timeout: 20)
    c.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n")
    c.read_response(timeout: timeout)
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # What client threads pushed to queue, as an Array (they have ended).
  def drained(queue)
    Array.new(queue.size) { queue.pop }
  end

  # A file in the server's directory the app wrote.
  def mark?(name)
    File.exist?(File.join(@server.dir, name))
  end

  # The app's request waiting for "release-NAME" goes on.
  def release(name)
    File.write(File.join(@server.dir, "release-#{name}"), "")
  end

  # Bytes the client sent that the server has not read yet (rx_queue of the
  # server's end of the connection); nil before the server accepted it.
  def unread_bytes(client)
    server_side_queues(client)&.last
  end

  # Bytes the server wrote that its client has not taken (tx_queue).
  def unsent_bytes(client)
    server_side_queues(client)&.first
  end

  # Connections waiting in the listen queue (the accept backlog: rx_queue
  # of the listening socket).
  def listen_queue
    tcp_entry(local: @server.port, state: "0A")&.last
  end

  private

  def server_side_queues(client)
    tcp_entry(local: @server.port, remote: client.sock.local_address.ip_port)
  end

  # [tx_queue, rx_queue] of the /proc/net/tcp line that matches.
  def tcp_entry(local:, remote: nil, state: nil)
    local_hex = format(":%04X", local)
    remote_hex = remote && format(":%04X", remote)
    File.foreach("/proc/net/tcp").each do |line|
      fields = line.split
      next unless fields[1].end_with?(local_hex)
      next if remote_hex && !fields[2].end_with?(remote_hex)
      next if state && fields[3] != state

      return fields[4].split(":").map { |q| Integer(q, 16) }
    end
    nil
  end
end
