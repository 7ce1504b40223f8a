# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Appends request data (anything a client sent) to a log line so that
    # it cannot break the line: no raw quote, backslash, control byte or,
    # for combined, non-ASCII byte. Strings that need nothing (nearly all)
    # are appended as they are; only the others are copied.
    module Escape
      # Printable ASCII except the quote and the backslash.
      UNSAFE = /[^\x20\x21\x23-\x5b\x5d-\x7e]/
      # The same and the space: for fields outside quotes.
      UNSAFE_BARE = /[^\x21\x23-\x5b\x5d-\x7e]/
      HEX = Array.new(256) { |b| format("\\x%02X", b).freeze }.freeze
      JSON_CONTROL = Array.new(32) { |b| format("\\u%04x", b).freeze }.freeze
      JSON_SHORT = { 0x22 => "\\\"", 0x5c => "\\\\", 0x0a => "\\n", 0x0d => "\\r", 0x09 => "\\t" }.freeze
      UTF_8 = Encoding::UTF_8

      # nginx's escaping: the quote, the backslash, control and non-ASCII
      # bytes as \xHH; bare: for a field outside quotes, the space too.
      def self.combined(buf, str, bare: false)
        str = str.to_s unless str.is_a?(String)
        return buf << str unless unsafe?(str, bare ? UNSAFE_BARE : UNSAFE)

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

      # Matching raises for encodings not ASCII-compatible: escape those.
      def self.unsafe?(str, unsafe = UNSAFE)
        str.match?(unsafe)
      rescue ArgumentError, EncodingError
        true
      end
    end
  end
end
