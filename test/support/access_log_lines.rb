# frozen_string_literal: true

require "json"
require "logger"
require "stringio"
require "time"

module Narwhal
  # An AccessLog on a file in a temp dir, read back line by line, and what a
  # combined line must look like: shared by the tests of AccessLog, its
  # formats and its buffer.
  module AccessLogLines
    # Apache's combined format, then duration, queue time and request id.
    QUOTED = /"((?:[^"\\]|\\.)*)"/
    STAMP = %r{\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]}
    SECONDS = /(\d+\.\d{6}|-)/
    COMBINED = /\A(\S+) - (\S+) #{STAMP} #{QUOTED} (\d{3}) (\d+) #{QUOTED} #{QUOTED} #{SECONDS} #{SECONDS} #{QUOTED}\n\z/

    ENV_GET = {
      "REMOTE_ADDR" => "10.0.0.7", "REQUEST_METHOD" => "GET", "REQUEST_URI" => "/a?b=1",
      "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_USER_AGENT" => "curl/7.88.1", "HTTP_REFERER" => "http://x/"
    }.freeze

    def setup
      @dir = Dir.mktmpdir("narwhal-access-log")
      @path = File.join(@dir, "access.log")
      @errors = StringIO.new
    end

    def teardown
      @log&.close
      FileUtils.rm_rf(@dir)
    end

    # A line writer (Format) of a log opened on @path.
    def writer(format)
      @log = Narwhal::AccessLog.open(@path, format, Logger.new(@errors))
      @log.line_writer
    end

    # What the file holds once the buffer is written out.
    def lines
      @log&.flush
      File.readlines(@path)
    end
  end
end
