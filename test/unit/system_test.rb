# frozen_string_literal: true

require "test_helper"

# System is only its parts' names: each is autoloaded from system/<name>.rb
# and is there, by that name, once loaded.
class SystemTest < Minitest::Test
  LIB = File.expand_path("../../lib", __dir__)

  # Every file of lib/narwhal/system/ is a part, and every part a file.
  def test_each_part_is_autoloaded_from_its_own_file
    files = Dir[File.join(LIB, "narwhal/system/*.rb")].map { |f| File.basename(f, ".rb") }.sort
    refute_empty files
    script = <<~RUBY
      require "narwhal"
      parts = Narwhal::System.constants.sort
      parts.each { |name| puts [name, Narwhal::System.autoload?(name)].join(" ") }
      parts.each { |name| Narwhal::System.const_get(name) }
      puts parts.map { |name| Narwhal::System.const_get(name).name }.join(" ")
    RUBY
    lines = IO.popen([RbConfig.ruby, "-I", LIB, "-e", script], &:read).lines(chomp: true)
    names = lines.pop.split
    expected = files.map { |f| f.split("_").map(&:capitalize).join }
    assert_equal expected.sort, names.map { |n| n.delete_prefix("Narwhal::System::") }.sort
    lines.each do |line|
      name, path = line.split
      file = name.gsub(/(?<=[a-z])(?=[A-Z])/, "_").downcase
      assert_equal "narwhal/system/#{file}", path, name
    end
    assert_equal files.size, lines.size
  end
end
