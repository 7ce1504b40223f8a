# frozen_string_literal: true

module Narwhal
  # Config files written to a temp dir and read by Configurator, and the
  # ConfigError they raise, without the path: shared by the tests of the
  # Configurator and its DSL's parts.
  module ConfigFiles
    def write_config(text)
      @dir = Dir.mktmpdir
      path = File.join(@dir, "narwhal.rb")
      File.write(path, text)
      path
    end

    def teardown
      FileUtils.rm_rf(@dir) if @dir
    end

    def config(text)
      Narwhal::Configurator.new(file: write_config(text))
    end

    # The message of the ConfigError the text raises, less "PATH:" in front.
    def config_error(text)
      @path = write_config(text)
      @path_prefix = "#{@path}:"
      e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: @path) }
      e.message.delete_prefix(@path_prefix)
    end
  end
end
