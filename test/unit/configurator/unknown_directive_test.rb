# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# What a config error says of a name the DSL does not know: the nearest
# directive or listen option.
class ConfiguratorUnknownDirectiveTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_unknown_directive_names_file_and_line_and_the_nearest_directive
    assert_equal "3: unknown directive worker_processs (did you mean worker_processes?)",
                 config_error("keepalive_timeout 1\n\nworker_processs 4\n")
    assert_equal "1: unknown directive keepalive_timout (did you mean keepalive_timeout?)",
                 config_error("keepalive_timout 5\n")
    assert_equal "1: unknown directive frobnicate", config_error("frobnicate\n")
  end

  def test_unsupported_listen_option
    path = write_config("listen ':9000', tcp_nopushh: true\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/:1: unknown listen option tcp_nopushh \(did you mean tcp_nopush\?\)\z/, e.message)
  end

  def test_a_puma_directive_gets_its_advice_another_name_the_nearest_known_one
    known = Narwhal::Configurator::DSL.directives
    unknown = Narwhal::Configurator::UnknownDirective
    assert_equal "workers is a Puma directive: use worker_processes 4", unknown.message(:workers, [4], known)
    assert_equal "unknown directive preload_ap (did you mean preload_app?)", unknown.message(:preload_ap, [], known)
    assert_equal "unknown directive zzz", unknown.message(:zzz, [], known)
  end

  def test_several_unknown_listen_options_are_named_together
    known = Narwhal::Configurator::LISTEN_OPTIONS
    assert_equal "unknown listen options nodelay, queue",
                 Narwhal::Configurator::UnknownDirective.listen_options(%i[nodelay queue], known)
    assert_equal "1: unknown listen options nodelay, queue",
                 config_error("listen ':0', nodelay: true, queue: 5\n")
  end
end
