"""The README's pytest example: a real tool call recorded once, replayed offline ever after."""


def test_paris_weather(dsh):
    result = dsh.run('/mock run weather_lookup({"city": "Paris"})', tools=["weather_lookup"])
    weather = result.result("weather_lookup")
    assert weather.value == {"city": "Paris", "forecast": "sunny", "temperatureC": 21}
    assert weather.output == "Paris: sunny, 21C"
