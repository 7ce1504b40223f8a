# frozen_string_literal: true

require "narwhal/rack_handler"

# Rack 2's Rack::Handler looks handlers up here.
module Rack
  module Handler
    Narwhal = ::Narwhal::RackHandler
    register :narwhal, Narwhal if respond_to?(:register)
  end
end
