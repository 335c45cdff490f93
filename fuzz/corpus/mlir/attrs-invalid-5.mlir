sd.mesh @mesh = <["data"=8(ici=2)]>
