# frozen_string_literal: true

require "fileutils"
require_relative "command_process"

module Narwhal
  # test/apps/rails, copied to a temporary directory (Rails writes tmp/ and
  # log/ into its root) and served on a free loopback port by a command run
  # with the app's own bundle (test/apps/rails/Gemfile, installed by
  # bin/setup). The copy is removed when the server is stopped.
  module RailsApp
    SOURCE = File.join(ServerProcess::ROOT, "test", "apps", "rails")
    GEMFILE = File.join(SOURCE, "Gemfile")
    WORKERS = 2 # config/narwhal.rb's worker_processes
    BOOT_TIMEOUT = 90 # a development-mode boot on a loaded 2-core machine

    # command: the argv to run in the app's root, e.g. %w[bin/rails server].
    def self.start(command)
      dir = Dir.mktmpdir("narwhal-rails")
      Dir.children(SOURCE).each do |entry|
        FileUtils.cp_r(File.join(SOURCE, entry), dir) unless %w[log tmp vendor .bundle].include?(entry)
      end
      env = CommandProcess.unbundled_env.reject { |k, _| %w[RUBYLIB WEB_CONCURRENCY NARWHAL_CONFIG].include?(k) }
      env = env.merge("BUNDLE_GEMFILE" => GEMFILE, "RAILS_ENV" => "development", "RACK_ENV" => "development")
      server = CommandProcess.new([RbConfig.ruby, *command], dir: dir, env: env)
      server.wait_ready(workers: WORKERS, timeout: BOOT_TIMEOUT)
    rescue StandardError
      server&.stop
      raise
    end
  end
end
