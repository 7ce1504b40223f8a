# frozen_string_literal: true

require "rbconfig"

module Narwhal
  # The app could not be loaded (or a worker could not start serving). The
  # message is one line that names the user's file and line: what an
  # operator needs, where a backtrace through Rack's and Ruby's internals
  # is noise (and, logged by a crash-looping worker, a flood).
  class BootError < StandardError
    # Where libraries live: frames there are not the user's code.
    LIBRARY_DIRS = [
      *Gem.path, RbConfig::CONFIG["rubylibdir"], RbConfig::CONFIG["vendordir"],
      RbConfig::CONFIG["sitedir"], File.expand_path("../..", __dir__) # narwhal's own lib/ and exe/
    ].compact.map { |dir| File.join(File.expand_path(dir), "") }.freeze

    def self.from(error)
      error.is_a?(BootError) ? error : new(describe(error))
    end

    # "FILE:LINE: first line of the message (Class)". A SyntaxError's
    # message already starts with its file and line; other errors get the
    # innermost frame in the user's own files, else the innermost frame.
    def self.describe(error)
      return error.message if error.is_a?(BootError)

      text = first_line(error)
      return "#{text} (#{error.class})" if error.is_a?(SyntaxError)

      where = user_frame(error)
      where ? "#{where}: #{text} (#{error.class})" : "#{text} (#{error.class})"
    end

    def self.first_line(error)
      line = error.message.to_s.lines.first.to_s.strip
      line.empty? ? error.class.name : line
    end

    def self.user_frame(error)
      frames = error.backtrace_locations || []
      frame = frames.find { |l| user_file?(l.absolute_path || l.path) } ||
              frames.find { |l| !l.path.start_with?("<internal:") }
      frame && "#{frame.absolute_path || frame.path}:#{frame.lineno}"
    end

    def self.user_file?(path)
      !path.start_with?("<internal:") && LIBRARY_DIRS.none? { |dir| path.start_with?(dir) }
    end
  end
end
