# frozen_string_literal: true

require "narwhal/version"
require "narwhal/native_extension"
Narwhal::NativeExtension.new.require_extension
require "narwhal/scoreboard" # reopens the extension's class: not autoloadable
require "fcntl"

# A pre-forking Rack HTTP server: Unicorn's process model with keep-alive,
# slow-client protection and a strict HTTP/1.1 parser in C.
module Narwhal
  # Where the process was started and how, for USR2 re-exec. Like Unicorn's
  # START_CTX it may be changed from the config file (for example `0` to the
  # path of a binstub that survives deploys).
  START_CTX = {
    argv: ARGV.map(&:dup),
    0 => $PROGRAM_NAME.dup,
    cwd: begin
      pwd = ENV.fetch("PWD", nil)
      # keep a symlinked deploy path (/app/current) when it is where we are
      pwd && File.stat(pwd).ino == File.stat(Dir.pwd).ino ? pwd : Dir.pwd
    rescue SystemCallError
      Dir.pwd
    end
  }

  # A bad configuration; the message names the file and line.
  class ConfigError < StandardError; end
  autoload :CLI, "narwhal/cli"
  autoload :Clock, "narwhal/clock"
  autoload :ClientGone, "narwhal/socket_writer"
  autoload :CountingSocketWriter, "narwhal/socket_writer"
  autoload :Configurator, "narwhal/configurator"
  autoload :Connection, "narwhal/connection"
  autoload :ErrorMessage, "narwhal/error_message"
  autoload :ErrorResponse, "narwhal/error_response"
  autoload :Input, "narwhal/input"
  autoload :Listener, "narwhal/listener"
  autoload :Master, "narwhal/master"
  autoload :NullInput, "narwhal/input"
  autoload :OutputStream, "narwhal/output_stream"
  autoload :Reactor, "narwhal/reactor"
  autoload :Request, "narwhal/request"
  autoload :ThreadedRequest, "narwhal/request"
  autoload :Responder, "narwhal/responder"
  autoload :WatchedResponder, "narwhal/responder"
  autoload :Dispatcher, "narwhal/dispatcher"
  autoload :AcceptGate, "narwhal/accept_gate"
  autoload :AccessLog, "narwhal/access_log"
  autoload :QueueTime, "narwhal/queue_time"
  autoload :ForkGuard, "narwhal/fork_guard"
  autoload :ForkError, "narwhal/fork_guard"
  autoload :ResponseWriter, "narwhal/response_writer"
  autoload :PendingSend, "narwhal/pending_send"
  autoload :AppBuilder, "narwhal/app_builder"
  autoload :AcceptBackoff, "narwhal/accept_backoff"
  autoload :BootError, "narwhal/boot_error"
  autoload :RackHandler, "narwhal/rack_handler"
  autoload :Server, "narwhal/server"
  autoload :System, "narwhal/system"
  autoload :SocketWriter, "narwhal/socket_writer"
  autoload :SoftTimeout, "narwhal/soft_timeout"
  autoload :RequestTimeout, "narwhal/soft_timeout"
  autoload :WriteTimeout, "narwhal/socket_writer"
  autoload :ResponseSpool, "narwhal/response_spool"
  autoload :SpoolBudget, "narwhal/spool_budget"
  autoload :Worker, "narwhal/worker"
  autoload :WorkerProcess, "narwhal/worker_process"
end
