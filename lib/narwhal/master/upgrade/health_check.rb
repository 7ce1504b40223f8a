# frozen_string_literal: true

require "stringio"

module Narwhal
  class Master
    module Upgrade
      # `upgrade_health_path`: each worker of a master started by USR2,
      # once its app is loaded and before it takes its first connection,
      # calls the app with GET PATH itself and must get 200; else it failed
      # to boot, with the answer as the reason.
      #
      # In the worker rather than over the network: the two generations
      # accept from the same sockets, so a request sent there could be
      # answered by an old worker (or by any one new worker, never by each);
      # and a worker that does not pass never serves a client. The env is
      # the one a request on the worker's first listener would get, with
      # the configured headers (Host for Rails' host authorization,
      # X-Forwarded-Proto for force_ssl).
      class HealthCheck
        attr_reader :path

        # headers: { "Name" => "value" }.
        def initialize(path, headers = {})
          @path = path
          @headers = headers
        end

        # Raises BootError unless app answers 200. template: the worker's
        # env defaults for its first listener.
        def verify(app, template)
          status, _headers, body = app.call(env(template))
          body.close if body.respond_to?(:close)
          return if status.to_i == 200

          raise BootError, "upgrade_health_path: GET #{@path} answered #{status.inspect}, not 200"
        rescue BootError
          raise
        rescue StandardError, ScriptError => e
          raise BootError, "upgrade_health_path: GET #{@path} raised #{BootError.describe(e)}"
        end

        # The request's env: GET PATH over HTTP/1.1 from 127.0.0.1.
        def env(template)
          path, query = @path.split("?", 2)
          env = template.merge("REQUEST_METHOD" => "GET", "PATH_INFO" => path, "QUERY_STRING" => query.to_s,
                               "SERVER_PROTOCOL" => "HTTP/1.1", "REMOTE_ADDR" => "127.0.0.1",
                               "rack.input" => StringIO.new(String.new(encoding: Encoding::BINARY)),
                               "rack.hijack?" => false, "rack.response_finished" => [])
          env["HTTP_HOST"] = "#{env['SERVER_NAME']}:#{env['SERVER_PORT']}"
          @headers.each { |name, value| env[env_name(name)] = value.to_s }
          env
        end

        private

        def env_name(header)
          name = header.to_s.upcase.tr("-", "_")
          %w[CONTENT_TYPE CONTENT_LENGTH].include?(name) ? name : "HTTP_#{name}"
        end
      end
    end
  end
end
