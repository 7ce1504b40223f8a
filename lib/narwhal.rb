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
  autoload :CountingSocketWriter, "narwhal/socket_writer"
  autoload :Configurator, "narwhal/configurator"
  autoload :Connection, "narwhal/connection"
  autoload :ClientGone, "narwhal/errors"
  autoload :ConfigError, "narwhal/errors"
  autoload :ErrorMessage, "narwhal/error_message"
  autoload :Listener, "narwhal/listener"
  autoload :Master, "narwhal/master"
  autoload :Next, "narwhal/next"
  autoload :Reactor, "narwhal/reactor"
  autoload :Request, "narwhal/request"
  autoload :ThreadedRequest, "narwhal/request"
  autoload :Responder, "narwhal/responder"
  autoload :Dispatcher, "narwhal/dispatcher"
  autoload :AccessLog, "narwhal/access_log"
  autoload :ForkError, "narwhal/errors"
  autoload :ResponseWriter, "narwhal/response_writer"
  autoload :AppBuilder, "narwhal/app_builder"
  autoload :BootError, "narwhal/boot_error"
  autoload :RackHandler, "narwhal/rack_handler"
  autoload :Server, "narwhal/server"
  autoload :System, "narwhal/system"
  autoload :SocketWriter, "narwhal/socket_writer"
  autoload :RequestTimeout, "narwhal/errors"
  autoload :WriteTimeout, "narwhal/errors"
  autoload :Worker, "narwhal/worker"
  autoload :WorkerProcess, "narwhal/worker_process"
end
