# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Appends request data (anything a client sent) to a log line so that
    # it cannot break the line: no raw quote, backslash, control byte or,
    # for combined, non-ASCII byte. Strings that need nothing (nearly all)
    # are appended as they are; only the others are copied.
    module Escape
      # Bytes that need escaping: control, the quote, the backslash,
      # non-ASCII. Listed, not negated: Onigmo scans a negated class
      # several times slower. /n for binary strings (the parser's), the
      # ASCII part for others (a non-ASCII one is escaped anyway).
      UNSAFE = /[\x00-\x1f"\\\x7f-\xff]/n
      UNSAFE_ASCII = /[\x00-\x1f"\\\x7f]/
      # The same and the space: for fields outside quotes.
      UNSAFE_BARE = /[\x00-\x20"\\\x7f-\xff]/n
      UNSAFE_BARE_ASCII = /[\x00-\x20"\\\x7f]/
      BINARY = Encoding::BINARY
      HEX = Array.new(256) { |b| format("\\x%02X", b).freeze }.freeze
      JSON_CONTROL = Array.new(32) { |b| format("\\u%04x", b).freeze }.freeze
      JSON_SHORT = { 0x22 => "\\\"", 0x5c => "\\\\", 0x0a => "\\n", 0x0d => "\\r", 0x09 => "\\t" }.freeze
      UTF_8 = Encoding::UTF_8

      # nginx's escaping: the quote, the backslash, control and non-ASCII
      # bytes as \xHH; bare: for a field outside quotes, the space too.
      def self.combined(buf, str, bare: false)
        str = str.to_s unless str.is_a?(String)
        return buf << str unless bare ? unsafe?(str, UNSAFE_BARE, UNSAFE_BARE_ASCII) : unsafe?(str)

        str.b.each_byte do |b|
          if b < 0x20 || b > 0x7e || b == 0x22 || b == 0x5c || (bare && b == 0x20) then buf << HEX[b]
          else buf << b
          end
        end
        buf
      end

      # A JSON string's contents: the quote, the backslash and control
      # characters escaped; UTF-8 kept; the bytes of a string that is not
      # valid UTF-8 as \u00HH (JSON has no bytes), so the line stays JSON.
      def self.json(buf, str)
        str = str.to_s unless str.is_a?(String)
        return buf << str unless unsafe?(str)

        bytes = str.b
        utf8 = bytes.dup.force_encoding(UTF_8).valid_encoding?
        bytes.each_byte do |b|
          if (short = JSON_SHORT[b]) then buf << short
          elsif b < 0x20 then buf << JSON_CONTROL[b]
          elsif b == 0x7f || (b > 0x7f && !utf8) then buf << format("\\u%04x", b)
          else buf << b
          end
        end
        buf
      end

      def self.unsafe?(str, bytes = UNSAFE, ascii = UNSAFE_ASCII)
        return str.match?(bytes) if str.encoding == BINARY

        !str.ascii_only? || str.match?(ascii)
      rescue ArgumentError, EncodingError # not ASCII-compatible (UTF-16): escape it
        true
      end
    end
  end
end
