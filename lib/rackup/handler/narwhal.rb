# frozen_string_literal: true

require "narwhal/rack_handler"

# rackup >= 2 (Rack 3) looks handlers up here.
module Rackup
  module Handler
    Narwhal = ::Narwhal::RackHandler
    register :narwhal, Narwhal if respond_to?(:register)
  end
end
