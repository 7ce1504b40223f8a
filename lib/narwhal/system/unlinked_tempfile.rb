# frozen_string_literal: true

require "securerandom"
require "tmpdir"

module Narwhal
  module System
    # A temporary file with no name: the disk space it holds is freed when it
    # is closed, or when the process dies however it dies. Request bodies
    # (Request::Input) and spooled responses (SocketWriter::Spool) go there once they
    # outgrow memory.
    module UnlinkedTempfile
      # Opens one in dir: O_TMPFILE where the file system has it, else a fresh
      # name unlinked at once. Binary; unbuffered (sync), so that a full disk
      # fails the write that hits it, not a later flush. Raises SystemCallError.
      def self.open(dir, prefix)
        file = begin
          File.open(dir, File::RDWR | File::TMPFILE, 0o600)
        rescue Errno::EOPNOTSUPP, Errno::EISDIR, Errno::EINVAL, NameError
          named(dir, prefix)
        end
        file.sync = true
        file.binmode
      end

      # Without O_TMPFILE (macOS, some file systems).
      def self.named(dir, prefix)
        path = File.join(dir, "#{prefix}-#{Process.pid}-#{SecureRandom.hex(8)}")
        file = File.open(path, File::RDWR | File::CREAT | File::EXCL, 0o600)
        File.unlink(path)
        file
      end
      private_class_method :named
    end
  end
end
