# frozen_string_literal: true

require "json"

module Narwhal
  class Master
    module Upgrade
      # The pipe from a master started by USR2 to the master that started
      # it, and the terms of the upgrade it carries down. The old master
      # opens it before the fork; the child passes the write end through
      # exec (NARWHAL_UPGRADE: the descriptor and the terms, as JSON) and
      # the new master says how its upgrade goes, one line each:
      #
      #   serving          its first worker serves
      #   ready            every worker serves (and answered the health path)
      #   failed REASON    it gives up; the old master serves on
      #
      # A pipe rather than a signal: it carries the reason, only the old
      # master reads it, and nothing else (no other program, no worker)
      # can say it.
      class Channel
        ENV_NAME = "NARWHAL_UPGRADE"
        MAX_LINE = 2048 # bytes; under PIPE_BUF, so a line arrives whole
        READ_SIZE = 4096

        # The upgrade's terms: "started" and "deadline" (Clock seconds,
        # the machine's monotonic clock; the deadline nil without
        # upgrade_timeout), "timeout", "health_path", "health_headers",
        # "old_pid".
        attr_reader :terms

        # In the old master, before USR2's fork.
        def self.open(terms)
          reader, writer = IO.pipe
          new(reader, writer, terms)
        end

        # In a new master: the channel its predecessor passed down, nil
        # without one (a master not started by USR2, or one of an older
        # narwhal). The variable goes, so neither workers nor the app's
        # programs see it.
        def self.take(env = ENV)
          text = env.delete(ENV_NAME) or return nil
          terms = JSON.parse(text)
          writer = IO.for_fd(Integer(terms.fetch("fd")), autoclose: true)
          writer.close_on_exec = true # a later USR2's exec must not carry it on
          new(nil, writer, terms)
        rescue JSON::ParserError, KeyError, ArgumentError, TypeError, SystemCallError
          nil
        end

        def initialize(reader, writer, terms)
          @reader = reader
          @writer = writer
          @terms = terms
          @buffer = String.new(encoding: Encoding::BINARY)
        end

        # What the old master's sleep watches: nil in the new master, and
        # once the new master closed its end (a pipe at EOF is always
        # readable).
        def reader
          @reader unless @reader.nil? || @reader.closed?
        end

        # In USR2's child, just before exec: returns exec's redirection map.
        def pass_on_exec(env = ENV)
          @reader.close
          fd = @writer.fileno
          @writer.close_on_exec = false
          env[ENV_NAME] = JSON.generate(@terms.merge("fd" => fd))
          { fd => fd }
        end

        # In the old master once the child is forked: the write end is the
        # child's alone.
        def forked
          @writer.close
        end

        # In the new master: one line; false when the old master could not
        # be told (it is gone).
        def tell(kind, text = nil)
          line = text ? "#{kind} #{text.to_s.tr("\r\n", '  ')}" : kind.to_s
          @writer.write_nonblock("#{line.b[0, MAX_LINE - 1]}\n", exception: false).is_a?(Integer)
        rescue IOError, SystemCallError
          false
        end

        # In the old master: every complete line so far, as [kind, text].
        # At EOF (the new master closed its end, or died) the read end is
        # closed.
        def messages
          return [] unless reader

          while (chunk = @reader.read_nonblock(READ_SIZE, exception: false)).is_a?(String)
            @buffer << chunk
          end
          @reader.close if chunk.nil?
          lines = []
          while (line = @buffer.slice!(/\A[^\n]*\n/))
            kind, text = line.chomp.split(" ", 2)
            lines << [kind, String.new(text.to_s, encoding: Encoding::UTF_8).scrub]
          end
          lines
        rescue IOError
          []
        end

        def close
          [@reader, @writer].each { |io| io.close if io && !io.closed? }
        end
      end
    end
  end
end
