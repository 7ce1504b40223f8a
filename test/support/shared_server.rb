# frozen_string_literal: true

# One server for every test of a class, started at the first test and
# stopped after the run; each test gets a fresh keep-alive connection to it
# in @c. A class names the server with `serve(**ServerProcess.start options)`.
module SharedServer
  def self.included(base)
    base.extend(ClassMethods)
  end

  # Class-level: the options and the one server.
  module ClassMethods
    def serve(**options)
      @server_options = options
    end

    def server
      @server ||= Narwhal::ServerProcess.start(**@server_options).stop_after_run
    end
  end

  def server = self.class.server

  def setup
    @c = server.connect
  end

  def teardown
    @c&.close
  end
end
