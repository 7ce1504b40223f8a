# frozen_string_literal: true

require "test_helper"

# Temporary files with no name: nothing is left in the directory, and the
# space goes with the descriptor.
class UnlinkedTempfileTest < Minitest::Test
  def test_the_file_has_no_name_and_reads_back_what_was_written
    Dir.mktmpdir do |dir|
      file = Narwhal::System::UnlinkedTempfile.open(dir, "narwhal-test")
      assert_empty Dir.children(dir), "no directory entry"
      assert file.sync, "unbuffered: a full disk fails the write that hits it"
      file.write("caf\xC3\xA9".b)
      assert_equal "caf\xC3\xA9".b, file.pread(5, 0)
      assert_equal Encoding::BINARY, file.external_encoding
      assert_match(/\(deleted\)\z/, File.readlink("/proc/self/fd/#{file.fileno}"))
      file.close
    end
  end

  def test_a_directory_that_cannot_hold_it_raises
    assert_raises(SystemCallError) { Narwhal::System::UnlinkedTempfile.open("/nonexistent-narwhal-dir", "narwhal-test") }
  end
end
