# frozen_string_literal: true

require_relative "server_process"

module Narwhal
  # A server started by some other command than exe/narwhal (rackup, rails
  # server, a bundle's narwhal), in a directory the test owns; waits, reads
  # the log and stops by pid as ServerProcess does. dir is removed by #stop.
  class CommandProcess < ServerProcess
    # env: the child's whole environment (unsetenv_others).
    def initialize(argv, dir:, env:)
      @dir = dir
      @log_path = File.join(dir, "server.log")
      # one open file for both: two would overwrite each other's lines
      @pid = Process.spawn(env, *argv, chdir: dir, out: @log_path, err: %i[child out], pgroup: true,
                                       unsetenv_others: true, in: File::NULL)
    end

    # This process's environment without what `bundle exec` put in it, for a
    # child that runs another bundle (Bundler's copy of the environment
    # predates the suite's mark: LeftoverProcesses.env puts it back).
    def self.unbundled_env
      env = defined?(Bundler) ? Bundler.with_unbundled_env { ENV.to_h } : ENV.to_h
      env.merge(LeftoverProcesses.env)
    end
  end
end
