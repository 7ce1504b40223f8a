# frozen_string_literal: true

require "test_helper"

class BootErrorTest < Minitest::Test
  def load_error(text, name: "config.ru")
    Dir.mktmpdir do |dir|
      path = File.join(dir, name)
      File.write(path, text)
      File.write(File.join(dir, "app.rb"), "def helper = 1\nundefined_thing\n")
      TOPLEVEL_BINDING.eval(File.read(path), path, 1)
      flunk "#{text.inspect} loaded"
    rescue ScriptError, StandardError => e
      return [Narwhal::BootError.describe(e), path]
    end
  end

  def test_a_syntax_error_is_its_first_line_only
    message, path = load_error("x = [1,\n")
    assert_match(/\A#{Regexp.escape(path)}:1: syntax error, .* \(SyntaxError\)\z/, message)
    refute_includes message, "\n"
  end

  def test_a_name_error_names_the_line_without_ruby_s_highlighting
    message, path = load_error("\nNoSuchThing.new\n")
    assert_equal "#{path}:2: uninitialized constant NoSuchThing (NameError)", message
  end

  def test_an_error_in_a_required_file_names_that_file
    message, path = load_error("require_relative 'app'\n")
    assert_equal "#{File.dirname(path)}/app.rb:2: undefined local variable or method `undefined_thing' " \
                 "for main:Object (NameError)", message
  end

  def test_an_error_raised_inside_ruby_or_a_gem_names_the_user_s_line
    message, path = load_error("x = 1\nrequire 'no/such/library'\n")
    assert_equal "#{path}:2: cannot load such file -- no/such/library (LoadError)", message
  end

  def test_a_boot_error_is_kept_as_it_is
    error = Narwhal::BootError.new("rackup file /x/config.ru not found")
    assert_same error, Narwhal::BootError.from(error)
    assert_equal "rackup file /x/config.ru not found", Narwhal::BootError.describe(error)
  end
end
