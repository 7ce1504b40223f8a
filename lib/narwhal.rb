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

  autoload :AccessLog, "narwhal/access_log"
  autoload :AppBuilder, "narwhal/app_builder"
  autoload :BootError, "narwhal/boot_error"
  autoload :CLI, "narwhal/cli"
  autoload :ClientGone, "narwhal/errors"
  autoload :Clock, "narwhal/clock"
  autoload :ConfigError, "narwhal/errors"
  autoload :Configurator, "narwhal/configurator"
  autoload :Connection, "narwhal/connection"
  autoload :Dispatcher, "narwhal/dispatcher"
  autoload :ErrorMessage, "narwhal/error_message"
  autoload :ForkError, "narwhal/errors"
  autoload :Listener, "narwhal/listener"
  autoload :Master, "narwhal/master"
  autoload :Next, "narwhal/next"
  autoload :RackHandler, "narwhal/rack_handler"
  autoload :Reactor, "narwhal/reactor"
  autoload :Request, "narwhal/request"
  autoload :RequestTimeout, "narwhal/errors"
  autoload :Responder, "narwhal/responder"
  autoload :ResponseWriter, "narwhal/response_writer"
  autoload :Server, "narwhal/server"
  autoload :SocketWriter, "narwhal/socket_writer"
  autoload :System, "narwhal/system"
  autoload :Worker, "narwhal/worker"
  autoload :WorkerProcess, "narwhal/worker_process"
  autoload :WriteTimeout, "narwhal/errors"
end
