# frozen_string_literal: true

module Bench
  # nginx or haproxy in front of two backends, as a deploy has one: the
  # proxy keeps connections to them alive and sends a new connection's
  # request to the other backend when one refuses it.
  class Proxy
    KINDS = %w[nginx haproxy].freeze
    STOP_TIMEOUT = 10

    attr_reader :port

    def initialize(kind, backends:, dir:)
      raise ArgumentError, "unknown proxy #{kind}" unless KINDS.include?(kind)

      @kind = kind
      @backends = backends
      @dir = dir
      @port = Bench.free_port
    end

    def start
      conf = File.join(@dir, "#{@kind}.conf")
      File.write(conf, @kind == "nginx" ? nginx_config : haproxy_config)
      argv = @kind == "nginx" ? ["nginx", "-c", conf, "-p", @dir] : ["haproxy", "-db", "-f", conf]
      @pid = Process.spawn(*argv, in: File::NULL, out: File.join(@dir, "#{@kind}.log"), err: %i[child out],
                                  pgroup: true)
      Bench.wait_until(30, "#{@kind} to listen on #{@port}") { accepting? }
      self
    end

    def stop
      return unless @pid

      Process.kill("TERM", @pid)
      done = begin
        Bench.wait_until(STOP_TIMEOUT, "#{@kind} to stop") { Process.waitpid(@pid, Process::WNOHANG) }
      rescue RuntimeError
        nil
      end
      return if done

      Process.kill("KILL", -@pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end

    private

    def accepting?
      raise "#{@kind} exited:\n#{File.read(File.join(@dir, "#{@kind}.log"))}" if Process.waitpid(@pid, Process::WNOHANG)

      Socket.tcp(HOST, @port, connect_timeout: 1).close
      true
    rescue SystemCallError
      false
    end

    # proxy_next_upstream's default (error timeout) passes a request whose
    # connect failed to the next server, and never one it has sent that is
    # not idempotent.
    def nginx_config
      <<~NGINX
        worker_processes 1;
        daemon off;
        pid #{@dir}/nginx.pid;
        error_log #{@dir}/nginx-error.log;
        events { worker_connections 4096; }
        http {
          access_log off;
          client_body_temp_path #{@dir};
          proxy_temp_path #{@dir};
          fastcgi_temp_path #{@dir};
          uwsgi_temp_path #{@dir};
          scgi_temp_path #{@dir};
          upstream backends {
        #{@backends.map { |p| "    server #{HOST}:#{p};" }.join("\n")}
            keepalive 32;
          }
          server {
            listen #{HOST}:#{@port} backlog=#{BACKLOG};
            location / {
              proxy_pass http://backends;
              proxy_http_version 1.1;
              proxy_set_header Connection "";
            }
          }
        }
      NGINX
    end

    # retries with redispatch: a connect that fails goes to the other
    # server; http-reuse safe (the default) keeps server connections alive.
    def haproxy_config
      <<~HAPROXY
        global
          maxconn 4096
        defaults
          mode http
          timeout connect 5s
          timeout client 30s
          timeout server 30s
          retries 3
          option redispatch
        frontend web
          bind #{HOST}:#{@port}
          default_backend app
        backend app
          balance roundrobin
        #{@backends.each_with_index.map { |p, i| "  server b#{i} #{HOST}:#{p}" }.join("\n")}
      HAPROXY
    end
  end
end
