# frozen_string_literal: true

module Narwhal
  # An exception as a sentence for the person running the server: Ruby's
  # class name is left out where it adds nothing to the message ("Errno::",
  # "ArgumentError:"), and kept in parentheses where it does (an exception
  # class of the app or of a library names what failed).
  module ErrorMessage
    # Classes whose name says nothing the message does not.
    PLAIN = [RuntimeError, StandardError, ArgumentError, TypeError, NameError, NoMethodError, KeyError,
             IndexError, RangeError, FrozenError, IOError, EOFError].freeze

    def self.for(error)
      text = case error
             when SystemCallError then system_call(error)
             when NameError then name_error(error)
             else error.message.to_s
             end
      plain?(error) ? text : "#{text} (#{error.class})"
    end

    # The backtrace as it follows a log line: one frame per line.
    def self.backtrace(error)
      "\n#{Array(error.backtrace).join("\n")}"
    end

    # A child's end as an operator reads it: "exit 1", "killed by SIGKILL".
    def self.exit_status(status)
      return "exit #{status.exitstatus}" if status.exited?
      return "killed by SIG#{Signal.signame(status.termsig)}" if status.signaled?

      status.to_s
    end

    # An error raised by code in a file (a config file), at the file's line.
    def self.in_file(error, path)
      full = File.expand_path(path)
      # a syntax error's message carries the file and line itself
      return error.message.gsub(full, path).rstrip if error.is_a?(SyntaxError)

      frame = error.backtrace_locations&.find { |l| l.absolute_path == full || l.path == full }
      line = frame&.lineno || error.message[/:(\d+):/, 1] || "?"
      "#{path}:#{line}: #{self.for(error)}"
    end

    # One line: the suggestions and the highlighted source line Ruby adds
    # come on lines of their own.
    def self.name_error(error)
      text = error.message.to_s
      guess = text[/^Did you mean\?\s+(\S+)/, 1]
      "#{text.lines.first.to_s.chomp}#{guess ? " (did you mean #{guess}?)" : ''}"
    end

    def self.plain?(error)
      PLAIN.include?(error.class) || error.is_a?(SystemCallError) || error.is_a?(ScriptError) ||
        error.is_a?(ConfigError) || (defined?(SocketError) && error.is_a?(SocketError)) ||
        error.class.name.to_s.start_with?("Narwhal::")
    end

    # "No such file or directory @ rb_sysopen - /run/app.pid" reads
    # "/run/app.pid: no such file or directory".
    def self.system_call(error)
      return error.message unless error.errno

      reason = strerror(error)
      detail = error.message.delete_prefix(SystemCallError.new(nil, error.errno).message)
      detail = detail.sub(/\A @ \w+/, "").delete_prefix(" - ").sub(/\A\w+\(\d\) for /, "")
      detail.empty? ? reason : "#{detail}: #{reason}"
    end

    # The C library's text for the error, starting lower-case to read in a sentence.
    def self.strerror(error)
      text = SystemCallError.new(nil, error.errno).message
      text.sub(/\A[A-Z](?=[a-z])/, &:downcase)
    end
  end
end
