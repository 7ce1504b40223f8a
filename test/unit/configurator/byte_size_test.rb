# frozen_string_literal: true

require "test_helper"

class ByteSizeTest < Minitest::Test
  def test_sizes_as_operators_write_them
    mib = 1024 * 1024
    {
      512 => 512, "512" => 512, "512B" => 512, "64K" => 64 * 1024, "64kb" => 64 * 1024, "512MB" => 512 * mib, "512M" => 512 * mib,
      "512Mi" => 512 * mib, "512 MiB" => 512 * mib, "1.5G" => 1536 * mib, "2gb" => 2048 * mib
    }.each { |text, bytes| assert_equal bytes, Narwhal::Configurator::ByteSize.parse(text), text.inspect }
  end

  def test_anything_else_is_not_a_size
    ["", "MB", "512i", "5kk", "12 parsecs", "1.5.2G", "-5M", "5T", "1e9", nil, 1.5, :big].each do |value|
      assert_nil Narwhal::Configurator::ByteSize.parse(value), value.inspect
    end
  end

  def test_sizes_read_back_in_binary_units
    assert_equal "612.0 MiB", Narwhal::Configurator::ByteSize.format(612 * 1024 * 1024)
    assert_equal "1.5 GiB", Narwhal::Configurator::ByteSize.format(1536 * 1024 * 1024)
    assert_equal "2.0 KiB", Narwhal::Configurator::ByteSize.format(2048)
    assert_equal "100 B", Narwhal::Configurator::ByteSize.format(100)
  end
end
